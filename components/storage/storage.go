// Package storage provides the shared ReadWriteMany claim that every workload mounts for
// checkpoints, logs and notebooks, backed by NFS: an external server, or an NFS server run inside
// the namespace, or a cloud file store (Filestore over NFS; EFS and Azure Files through their CSI
// drivers, csi.go); or, on a one-node cluster, a directory of the node (HostPath). Per-pod
// scratch (emptyDir or a local SSD path) is rendered by Scratch.
package storage

import (
	"errors"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	storagev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/storage/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// ServerName is the in-cluster NFS server's Deployment and Service.
	ServerName = "nfs-server"
	// nfsPort, mountdPort, rpcbindPort: the ports an NFSv3/v4 client may need.
	nfsPort     = 2049
	mountdPort  = 20048
	rpcbindPort = 111
	// exportDir is where the in-cluster server keeps and exports its data.
	exportDir = "/exports"
)

// NFSPort, MountdPort, RPCBindPort are the in-cluster server's ports, for its NetworkPolicy.
const (
	NFSPort     = nfsPort
	MountdPort  = mountdPort
	RPCBindPort = rpcbindPort
)

// Args are the shared storage's inputs.
type Args struct {
	Namespace    pulumi.StringInput // namespace of the claim and the in-cluster server
	NamespaceDNS string             // the namespace's name, for the server's DNS name
	VolumeName   string             // cluster-scoped PersistentVolume name; unique per stack
	ClaimName    string             // the RWX claim every workload mounts
	InCluster    bool               // run an NFS server in the namespace
	Server       string             // external server address (InCluster false)
	Path         string             // exported path on the server
	Size         string             // capacity of the volume and claim (quantity)
	ServerImage  string             // in-cluster server image
	ServerPool   string             // pool the in-cluster server runs on
	Protect      bool               // protect the volume and claim from `pulumi destroy`
	Labels       meta.Labels

	// ServerAddress, when set, is the NFS server's address as a cloud file store reports it once
	// created (Filestore); it takes the place of Server.
	ServerAddress pulumi.StringInput
	// MountOptions of the NFS volume; default nfsvers=4.1, hard. Filestore serves NFSv3.
	MountOptions []string
	// CSI, when set, serves the volume through a CSI driver (EFS, Azure Files) instead of NFS.
	CSI *CSI
	// HostPath, when set, is a directory of the node that backs the volume instead of NFS: every
	// pod of the stack shares it, which is shared storage only on a one-node cluster. The
	// kubelet creates it if missing; the volume keeps it when released (Retain).
	HostPath string
	// Owner, when set, gives the claim's root directory to the user the workloads run as
	// (owner.go); nil leaves it to root.
	Owner *Owner
	// VolumeDeps are what the volume waits for: a cloud store's private DNS records (Azure Files
	// behind a private endpoint).
	VolumeDeps []pulumi.Resource
	// PodDeps are what the store's own pods (the in-cluster server, the owner Job) wait for and
	// nothing else of it does: the pool they run on (on the simulated cloud) and the pull
	// Secrets. The volume and the claim never wait for a pool, so that
	// `pulumi destroy --exclude-protected` keeps no pool for a protected claim.
	PodDeps []pulumi.Resource
	// External: the store is not the stack's (an external NFS server, an existing EFS file system
	// or Azure Files share). The volume keeps it when released (Retain) whatever Protect says, so
	// that deleting the claim or the stack can never ask a driver to delete it.
	External bool
}

// Storage is the shared claim and whatever backs it.
type Storage struct {
	pulumi.ResourceState
	ClaimName pulumi.StringOutput // the claim to mount
	// Claim is the PersistentVolumeClaim (bound once its volume is). Depend on Ready, not on the
	// component: the SDK adds a child to its component from the child's registration goroutine,
	// so a dependency on the component taken just after New returns may miss the claim.
	Claim pulumi.Resource
	// Ready is what a pod that mounts the claim waits for: the claim, the in-cluster server
	// whose readiness probe says NFS answers (made beside the volume and claim, not before them:
	// the three are awaited at once), and the Job that gives the claim's root to the workloads'
	// user when there is one (Args.Owner).
	Ready []pulumi.Resource
}

// New registers the storage.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Storage, error) {
	if args == nil {
		return nil, errors.New("storage: args are required")
	}
	s := &Storage{}
	if err := ctx.RegisterComponentResource("kolotoc:storage:Storage", name, s, opts...); err != nil {
		return nil, fmt.Errorf("storage %q: %w", name, err)
	}
	server := pulumi.String(args.Server).ToStringOutput()
	// What the volume waits for before it is created.
	var volumeDeps []pulumi.Resource
	// What a pod that mounts the claim waits for besides the claim (so that none mounts it too
	// early): the in-cluster server's Deployment.
	var serving []pulumi.Resource
	podDeps := pulumi.DependsOn(args.PodDeps)
	if args.InCluster {
		// Pods that mount the claim wait for the server's Deployment, whose readiness probe says
		// NFS answers; the volume only needs the Service's address. The Service is not waited
		// for (see RenderServerService).
		dep, err := appsv1.NewDeployment(ctx, name+"-server", RenderServerDeployment(args), pulumi.Parent(s), podDeps)
		if err != nil {
			return nil, fmt.Errorf("storage %q: Deployment %q: %w", name, name+"-server", err)
		}
		serving = append(serving, dep)
		svc, err := corev1.NewService(ctx, name+"-server", RenderServerService(args), pulumi.Parent(s))
		if err != nil {
			return nil, fmt.Errorf("storage %q: Service %q: %w", name, name+"-server", err)
		}
		// The kubelet mounts NFS with the node's resolver, which cannot resolve cluster DNS names:
		// the volume must point at the Service's ClusterIP. Before the Service exists (the
		// preview of a first deployment) the IP is empty; the preview then shows the Service's
		// DNS name, and the deployment itself uses the IP.
		dnsName := fmt.Sprintf("%s.%s.svc", ServerName, args.NamespaceDNS)
		server = svc.Spec.ClusterIP().Elem().ApplyT(func(ip string) string {
			if ip == "" {
				return dnsName
			}
			return ip
		}).(pulumi.StringOutput)
	}
	if args.ServerAddress != nil {
		server = args.ServerAddress.ToStringOutput()
	}
	// Checkpoints outlive a `pulumi destroy` only if Pulumi refuses to delete the claim and the
	// volume keeps its data when the claim goes (Retain).
	protect := pulumi.Protect(args.Protect)
	if args.CSI != nil && args.CSI.SecretData != nil {
		sec, err := corev1.NewSecret(ctx, name+"-credentials", RenderCredentials(args), pulumi.Parent(s))
		if err != nil {
			return nil, fmt.Errorf("storage %q: Secret %q: %w", name, name+"-credentials", err)
		}
		volumeDeps = append(volumeDeps, sec)
	}
	if args.CSI != nil && args.CSI.ClassParameters != nil {
		sc, err := storagev1.NewStorageClass(ctx, name, RenderStorageClass(args), pulumi.Parent(s), protect)
		if err != nil {
			return nil, fmt.Errorf("storage %q: StorageClass %q: %w", name, name, err)
		}
		volumeDeps = append(volumeDeps, sc)
	}
	volumeDeps = append(volumeDeps, args.VolumeDeps...)
	pv, err := corev1.NewPersistentVolume(ctx, name, RenderVolume(args, server), pulumi.Parent(s), protect, pulumi.DependsOn(volumeDeps))
	if err != nil {
		return nil, fmt.Errorf("storage %q: PersistentVolume %q: %w", name, name, err)
	}
	pvc, err := corev1.NewPersistentVolumeClaim(ctx, name, RenderClaim(args), pulumi.Parent(s), protect, pulumi.DependsOn([]pulumi.Resource{pv}))
	if err != nil {
		return nil, fmt.Errorf("storage %q: PersistentVolumeClaim %q: %w", name, name, err)
	}
	s.ClaimName, s.Claim = pvc.Metadata.Name().Elem(), pvc
	s.Ready = append([]pulumi.Resource{pvc}, serving...)
	if args.Owner != nil {
		// Awaited until it completes (the provider waits for a Job), so that no workload starts
		// on a directory it cannot write. A new uid is a new pod template, which a Job cannot
		// take: the old Job goes first. It mounts the claim, so it waits for what any such pod
		// does, and for its own pool.
		job, err := batchv1.NewJob(ctx, name+"-owner", RenderOwnerJob(args), pulumi.Parent(s),
			pulumi.DependsOn(s.Ready), podDeps, pulumi.DeleteBeforeReplace(true))
		if err != nil {
			return nil, fmt.Errorf("storage %q: Job %q: %w", name, name+"-owner", err)
		}
		s.Ready = append(s.Ready, job)
	}
	return s, meta.RegisterOutputs(ctx, s, pulumi.Map{"claimName": s.ClaimName})
}

// RenderVolume builds the PersistentVolume (NFS, CSI or a host directory), pre-bound to the claim.
func RenderVolume(a *Args, server pulumi.StringInput) *corev1.PersistentVolumeArgs {
	reclaim := "Delete"
	if a.Protect || a.HostPath != "" || a.External {
		// A hostPath volume has no deleter: Delete would leave it Failed once released.
		reclaim = "Retain"
	}
	path := a.Path
	if a.InCluster {
		path = "/"
	}
	var mountOptions pulumi.StringArrayInput = pulumi.ToStringArray(a.MountOptions)
	if len(a.MountOptions) == 0 {
		mountOptions = pulumi.StringArray{pulumi.String("nfsvers=4.1"), pulumi.String("hard")}
	}
	var nfs *corev1.NFSVolumeSourceArgs
	var csi *corev1.CSIPersistentVolumeSourceArgs
	var hostPath *corev1.HostPathVolumeSourceArgs
	switch {
	case a.HostPath != "":
		hostPath = &corev1.HostPathVolumeSourceArgs{Path: pulumi.String(a.HostPath), Type: pulumi.String("DirectoryOrCreate")}
		mountOptions = nil // the API server refuses mount options on a hostPath volume
	case a.CSI != nil:
		csi = RenderCSIVolumeSource(a)
	default:
		nfs = &corev1.NFSVolumeSourceArgs{Server: server, Path: pulumi.String(path)}
	}
	return &corev1.PersistentVolumeArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(a.VolumeName), Labels: pulumi.ToStringMap(a.Labels.For("storage"))},
		Spec: &corev1.PersistentVolumeSpecArgs{
			Capacity:                      pulumi.StringMap{"storage": pulumi.String(a.Size)},
			AccessModes:                   pulumi.StringArray{pulumi.String("ReadWriteMany")},
			PersistentVolumeReclaimPolicy: pulumi.String(reclaim),
			StorageClassName:              pulumi.String(storageClassName(a)),
			MountOptions:                  mountOptions,
			Nfs:                           nfs,
			Csi:                           csi,
			HostPath:                      hostPath,
			ClaimRef: &corev1.ObjectReferenceArgs{
				Namespace: a.Namespace,
				Name:      pulumi.String(a.ClaimName),
			},
		},
	}
}

// RenderClaim builds the ReadWriteMany claim, bound to the volume by name (no provisioner needed).
func RenderClaim(a *Args) *corev1.PersistentVolumeClaimArgs {
	return &corev1.PersistentVolumeClaimArgs{
		Metadata: a.Labels.ObjectMeta(a.ClaimName, a.Namespace, "storage"),
		Spec: &corev1.PersistentVolumeClaimSpecArgs{
			AccessModes:      pulumi.StringArray{pulumi.String("ReadWriteMany")},
			StorageClassName: pulumi.String(storageClassName(a)),
			VolumeName:       pulumi.String(a.VolumeName),
			Resources: &corev1.VolumeResourceRequirementsArgs{
				Requests: pulumi.StringMap{"storage": pulumi.String(a.Size)},
			},
		},
	}
}

// RenderServerDeployment builds the in-cluster NFS server. The kernel NFS server needs a
// privileged container; its data lives in an emptyDir, so it is for development clusters: data
// survives pod restarts on the same node only. Keep checkpoints on an external server (type nfs)
// or a cloud file store.
func RenderServerDeployment(a *Args) *appsv1.DeploymentArgs {
	return &appsv1.DeploymentArgs{
		Metadata: a.Labels.ObjectMeta(ServerName, a.Namespace, ServerName),
		Spec: &appsv1.DeploymentSpecArgs{
			Replicas: pulumi.Int(1),
			// Two NFS servers must never export the same data: stop the old one first.
			Strategy: &appsv1.DeploymentStrategyArgs{Type: pulumi.String("Recreate")},
			Selector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(ServerName))},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(ServerName))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.PodSecurity(0),
					NodeSelector:                 a.Labels.PoolSelector(a.ServerPool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String("nfs-server"),
						Image: pulumi.String(a.ServerImage),
						Env: corev1.EnvVarArray{corev1.EnvVarArgs{
							Name: pulumi.String("SHARED_DIRECTORY"), Value: pulumi.String(exportDir),
						}},
						Ports: corev1.ContainerPortArray{
							corev1.ContainerPortArgs{Name: pulumi.String("nfs"), ContainerPort: pulumi.Int(nfsPort)},
							corev1.ContainerPortArgs{Name: pulumi.String("mountd"), ContainerPort: pulumi.Int(mountdPort)},
							corev1.ContainerPortArgs{Name: pulumi.String("rpcbind"), ContainerPort: pulumi.Int(rpcbindPort)},
						},
						ReadinessProbe: &corev1.ProbeArgs{
							TcpSocket:     &corev1.TCPSocketActionArgs{Port: pulumi.Int(nfsPort)},
							PeriodSeconds: pulumi.Int(10),
						},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("250m"), "memory": pulumi.String("256Mi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("1"), "memory": pulumi.String("1Gi")},
						},
						// The kernel NFS server needs a privileged container: the documented cost of
						// storage.type in-cluster-nfs, which makes the namespace's Pod Security
						// level privileged.
						SecurityContext: &corev1.SecurityContextArgs{Privileged: pulumi.Bool(true)},
						VolumeMounts: corev1.VolumeMountArray{corev1.VolumeMountArgs{
							Name: pulumi.String("exports"), MountPath: pulumi.String(exportDir),
						}},
					}},
					Volumes: corev1.VolumeArray{corev1.VolumeArgs{
						Name:     pulumi.String("exports"),
						EmptyDir: &corev1.EmptyDirVolumeSourceArgs{SizeLimit: pulumi.String(a.Size)},
					}},
				},
			},
		},
	}
}

// RenderServerService builds the in-cluster NFS server's Service. The provider does not wait for
// it (pulumi.com/skipAwait): its ClusterIP, which the volume needs, is set when it is created,
// and the server's readiness is the Deployment's, which the volume waits for. Waited for, a
// Service is ready only 10 s after its endpoints last changed (the provider lets them settle),
// and those 10 s delayed every pod that mounts the shared volume, at every first deployment.
func RenderServerService(a *Args) *corev1.ServiceArgs {
	port := func(name string, p int) corev1.ServicePortArgs {
		return corev1.ServicePortArgs{Name: pulumi.String(name), Port: pulumi.Int(p), TargetPort: pulumi.Int(p)}
	}
	return &corev1.ServiceArgs{
		Metadata: a.Labels.ServiceMeta(ServerName, a.Namespace, ServerName),
		Spec: &corev1.ServiceSpecArgs{
			Selector: pulumi.ToStringMap(a.Labels.Selector(ServerName)),
			Ports:    corev1.ServicePortArray{port("nfs", nfsPort), port("mountd", mountdPort), port("rpcbind", rpcbindPort)},
		},
	}
}

// VolumeName is the cluster-scoped PersistentVolume name of a stack's shared storage.
func VolumeName(namespace, claim string) string { return fmt.Sprintf("%s-%s", namespace, claim) }
