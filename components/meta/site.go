package meta

import (
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Site is what every workload takes from the stack around it, beside its own config section:
// where its objects go and how they are labelled, the shared claim and the node-local scratch its
// pods mount, the user they run as, whether the stack is suspended, the code cloned into them,
// and what its pods wait for. The stack builds one Site and hands it to every workload; a
// workload's Args are its Config, the Site, and the few names and values the stack derives.
type Site struct {
	Namespace    pulumi.StringInput // namespace of every object
	NamespaceDNS string             // the namespace's name, for hostnames, URLs and commands
	Labels       Labels
	Claim        string  // the shared claim (ReadWriteMany), mounted at MountPath
	MountPath    string  // where every pod sees the shared claim
	Scratch      Scratch // node-local scratch space of every pod
	// RunAsUser is the uid (and gid) of every container; 0 keeps the image's user.
	RunAsUser int
	Suspend   bool  // kolotoc:suspend: no training pods, every GPU freed; they start again when unset
	Code      *Code // repository cloned into every pod; nil for none
	// PodDeps are what the pods wait for besides the component's own dependencies: the node
	// pools they are placed on, the shared claim and the Job that gives it to the workloads'
	// user. Only the pod-making resources take them: the component's Secrets, ConfigMaps and
	// Services need neither nodes nor the claim, and are made while the nodes are.
	PodDeps []pulumi.Resource
}

// WithPodDeps is the site with deps as what the pods wait for.
func (s Site) WithPodDeps(deps ...pulumi.Resource) Site {
	s.PodDeps = deps
	return s
}

// SharedVolumes are the shared claim ("shared") and the scratch space ("scratch"), as every
// training pod mounts them (SharedMounts).
func (s Site) SharedVolumes() corev1.VolumeArray {
	return corev1.VolumeArray{ClaimVolume("shared", s.Claim), ScratchVolume("scratch", s.Scratch)}
}

// SharedMounts mount SharedVolumes at the claim's and the scratch space's paths.
func (s Site) SharedMounts() corev1.VolumeMountArray {
	return corev1.VolumeMountArray{Mount("shared", s.MountPath), Mount("scratch", s.Scratch.MountPath)}
}

// Scratch is per-pod scratch space (kolotoc:storage.scratch).
type Scratch struct {
	HostPath  string // a local SSD's mount point on the node; empty for emptyDir
	SizeLimit string // emptyDir size limit (quantity)
	MountPath string // where containers see it
}

// ScratchVolume renders the scratch volume named name.
func ScratchVolume(name string, s Scratch) corev1.VolumeArgs {
	if s.HostPath != "" {
		return corev1.VolumeArgs{Name: pulumi.String(name), HostPath: &corev1.HostPathVolumeSourceArgs{
			Path: pulumi.String(s.HostPath), Type: pulumi.String("DirectoryOrCreate"),
		}}
	}
	return corev1.VolumeArgs{Name: pulumi.String(name), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{SizeLimit: pulumi.String(s.SizeLimit)}}
}

// ClaimVolume renders a volume of the shared claim.
func ClaimVolume(name, claim string) corev1.VolumeArgs {
	return corev1.VolumeArgs{Name: pulumi.String(name), PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSourceArgs{
		ClaimName: pulumi.String(claim),
	}}
}

// Mount renders a volume mount.
func Mount(name, path string) corev1.VolumeMountArgs {
	return corev1.VolumeMountArgs{Name: pulumi.String(name), MountPath: pulumi.String(path)}
}
