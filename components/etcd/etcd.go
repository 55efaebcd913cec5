// Package etcd runs the rendezvous store of elastic training: a StatefulSet of 1 or 3 etcd 3.5
// members with the v2 API enabled (torch's etcd and etcd-v2 rendezvous backends speak v2, which
// etcd 3.6 removed), a client Service, a headless peer Service, a volume per member and, for
// three members, a PodDisruptionBudget that keeps the quorum through node drains.
package etcd

import (
	"errors"
	"fmt"
	"strings"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// Name is the store's object name in a stack (Args.Name): its StatefulSet and client Service,
	// pods etcd-0 …; Component, the members' app.kubernetes.io/component label, is the same word.
	Name      = "etcd"
	Component = Name
	// ClientPort and PeerPort are etcd's standard ports.
	ClientPort = 2379
	PeerPort   = 2380
	// dataDir is where a member's volume is mounted; etcd keeps its data in a subdirectory so
	// that a lost+found at the volume root does not make etcd refuse the directory.
	dataDir = "/var/lib/etcd"
	// volumeName is the volume claim template's name; claims are <volumeName>-<Name>-<i>.
	volumeName = "data"
	// compactionRetention: revisions kept by auto-compaction. Rendezvous rewrites a handful of
	// keys per round; without compaction the database grows until it hits its quota.
	compactionRetention = "1000"
)

// Args are the etcd cluster's inputs: its section (kolotoc:etcd, defaulted and validated), the
// site the stack gives every workload (the members use its namespace, labels and PodDeps: the
// node pools they are placed on), and what the stack derives.
type Args struct {
	Config
	meta.Site
	Name          string // StatefulSet and client Service; the peer Service is Name-peer; pods Name-0 …
	StaticVolumes bool   // pre-create one hostPath volume per member, for clusters without a provisioner (simulated)
	// VolumeID names this life of the namespace (its UID) in the static volumes' host paths, so
	// that a stack destroyed and created again starts from empty members: etcd finds a data
	// directory it knows and resumes that cluster, and the old rendezvous' store keys (which carry
	// no TTL) gave the new workers another round's master port, so they never met.
	VolumeID pulumi.StringInput
}

// Etcd is the rendezvous store.
type Etcd struct {
	pulumi.ResourceState
	StatefulSet *appsv1.StatefulSet
	Endpoint    pulumi.StringOutput // client endpoint host:port, as torchrun's --rdzv-endpoint wants it
}

// New registers the etcd cluster.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Etcd, error) {
	if args == nil {
		return nil, errors.New("etcd: args are required")
	}
	if args.Members != 1 && args.Members != 3 {
		return nil, fmt.Errorf("etcd %q: members must be 1 or 3, got %d", name, args.Members)
	}
	e := &Etcd{}
	if err := ctx.RegisterComponentResource("kolotoc:etcd:Etcd", name, e, opts...); err != nil {
		return nil, fmt.Errorf("etcd %q: %w", name, err)
	}
	// The members need their names (the peer Service) and volumes first. The client Service
	// must not be among their dependencies: Pulumi waits for it to have ready endpoints, which
	// only the members can give it.
	peer, err := corev1.NewService(ctx, name+"-peer", RenderPeerService(args), pulumi.Parent(e))
	if err != nil {
		return nil, fmt.Errorf("etcd %q: Service %q: %w", name, name+"-peer", err)
	}
	deps := []pulumi.Resource{peer}
	if _, err := corev1.NewService(ctx, name, RenderClientService(args), pulumi.Parent(e)); err != nil {
		return nil, fmt.Errorf("etcd %q: Service %q: %w", name, name, err)
	}
	if args.StaticVolumes {
		for i := 0; i < args.Members; i++ {
			// A volume made before VolumeID keeps its directory (a new path would replace a
			// bound volume); the next life of the namespace gets a new one.
			pv, err := corev1.NewPersistentVolume(ctx, fmt.Sprintf("%s-%s-%d", name, volumeName, i), RenderVolume(args, i), pulumi.Parent(e),
				pulumi.IgnoreChanges([]string{"spec.hostPath.path"}))
			if err != nil {
				return nil, fmt.Errorf("etcd %q: PersistentVolume %q: %w", name, fmt.Sprintf("%s-%s-%d", name, volumeName, i), err)
			}
			deps = append(deps, pv)
		}
	}
	if args.Members > 1 {
		if _, err := policyv1.NewPodDisruptionBudget(ctx, name, RenderDisruptionBudget(args), pulumi.Parent(e)); err != nil {
			return nil, fmt.Errorf("etcd %q: PodDisruptionBudget %q: %w", name, name, err)
		}
	}
	e.StatefulSet, err = appsv1.NewStatefulSet(ctx, name, RenderStatefulSet(args), pulumi.Parent(e), pulumi.DependsOn(append(deps, args.PodDeps...)))
	if err != nil {
		return nil, fmt.Errorf("etcd %q: StatefulSet %q: %w", name, name, err)
	}
	e.Endpoint = pulumi.String(ClientEndpoint(args.Name, args.NamespaceDNS)).ToStringOutput()
	return e, meta.RegisterOutputs(ctx, e, pulumi.Map{"endpoint": e.Endpoint})
}

// ClientEndpoint is the client Service's host:port.
func ClientEndpoint(name, namespace string) string {
	return fmt.Sprintf("%s.%s.svc:%d", name, namespace, ClientPort)
}

// PeerService is the headless Service that names the members.
func PeerService(name string) string { return name + "-peer" }

// memberHost is member i's stable DNS name through the peer Service.
func memberHost(a *Args, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc", member, PeerService(a.Name), a.NamespaceDNS)
}

// InitialCluster is etcd's --initial-cluster: every member's name and peer URL.
func InitialCluster(a *Args) string {
	parts := make([]string, a.Members)
	for i := range parts {
		m := fmt.Sprintf("%s-%d", a.Name, i)
		parts[i] = fmt.Sprintf("%s=http://%s:%d", m, memberHost(a, m), PeerPort)
	}
	return strings.Join(parts, ",")
}

// ClaimName is the claim the StatefulSet controller makes for member i.
func ClaimName(name string, i int) string { return fmt.Sprintf("%s-%s-%d", volumeName, name, i) }

// VolumeName is the cluster-scoped name of member i's static volume; unique per namespace.
func VolumeName(namespace, name string, i int) string {
	return fmt.Sprintf("%s-%s-%s-%d", namespace, name, volumeName, i)
}

// RenderClientService is the Service clients (torchrun) connect to.
func RenderClientService(a *Args) *corev1.ServiceArgs {
	return &corev1.ServiceArgs{
		Metadata: a.Labels.ServiceMeta(a.Name, a.Namespace, Component),
		Spec: &corev1.ServiceSpecArgs{
			Selector: pulumi.ToStringMap(a.Labels.Selector(Component)),
			Ports: corev1.ServicePortArray{corev1.ServicePortArgs{
				Name: pulumi.String("client"), Port: pulumi.Int(ClientPort), TargetPort: pulumi.Int(ClientPort),
			}},
		},
	}
}

// RenderPeerService is the headless Service that gives every member its DNS name. Not-ready
// addresses are published: a member becomes ready only once the members have found each other
// and elected a leader, which they cannot do without each other's names.
func RenderPeerService(a *Args) *corev1.ServiceArgs {
	return a.Labels.HeadlessService(PeerService(a.Name), a.Namespace, Component, true,
		meta.Port{Name: "client", Port: ClientPort}, meta.Port{Name: "peer", Port: PeerPort})
}

// RenderVolume is member i's static volume: a hostPath on whichever node runs the member,
// pre-bound to the member's claim. Only for clusters without a provisioner (the simulated
// cloud); elsewhere the claims are provisioned from a storage class.
func RenderVolume(a *Args, i int) *corev1.PersistentVolumeArgs {
	return &corev1.PersistentVolumeArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(VolumeName(a.NamespaceDNS, a.Name, i)),
			Labels: pulumi.ToStringMap(a.Labels.For(Component)),
		},
		Spec: &corev1.PersistentVolumeSpecArgs{
			Capacity:    pulumi.StringMap{"storage": pulumi.String(a.StorageSize)},
			AccessModes: pulumi.StringArray{pulumi.String("ReadWriteOnce")},
			// Rendezvous state is worthless once the job is gone; hostPath volumes cannot be
			// deleted by the cluster, so Pulumi deletes them and Retain keeps the cluster out.
			PersistentVolumeReclaimPolicy: pulumi.String("Retain"),
			StorageClassName:              pulumi.String(""),
			HostPath: &corev1.HostPathVolumeSourceArgs{
				Path: HostPath(a, i),
				Type: pulumi.String("DirectoryOrCreate"),
			},
			ClaimRef: &corev1.ObjectReferenceArgs{Namespace: a.Namespace, Name: pulumi.String(ClaimName(a.Name, i))},
		},
	}
}

// HostPath is member i's directory on the node: under the namespace's name and, with VolumeID,
// under this life of the namespace.
func HostPath(a *Args, i int) pulumi.StringInput {
	if a.VolumeID == nil {
		return pulumi.Sprintf("/var/lib/kolotoc/%s/%s-%d", a.NamespaceDNS, a.Name, i)
	}
	return pulumi.Sprintf("/var/lib/kolotoc/%s/%s/%s-%d", a.NamespaceDNS, a.VolumeID, a.Name, i)
}

// RenderDisruptionBudget lets a drain take one member of three at a time: two keep the quorum.
func RenderDisruptionBudget(a *Args) *policyv1.PodDisruptionBudgetArgs {
	return &policyv1.PodDisruptionBudgetArgs{
		Metadata: a.Labels.ObjectMeta(a.Name, a.Namespace, Component),
		Spec: &policyv1.PodDisruptionBudgetSpecArgs{
			MaxUnavailable: pulumi.Int(1),
			Selector:       &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(Component))},
		},
	}
}

// Command is the members' etcd command line. $(POD_NAME) is expanded by the kubelet, so one
// pod template serves every member (the image is distroless: there is no shell to do it).
func Command(a *Args) []string {
	self := memberHost(a, "$(POD_NAME)")
	return []string{
		"/usr/local/bin/etcd",
		"--name=$(POD_NAME)",
		"--data-dir=" + dataDir + "/data",
		fmt.Sprintf("--listen-client-urls=http://0.0.0.0:%d", ClientPort),
		fmt.Sprintf("--advertise-client-urls=http://%s:%d", self, ClientPort),
		fmt.Sprintf("--listen-peer-urls=http://0.0.0.0:%d", PeerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://%s:%d", self, PeerPort),
		"--initial-cluster=" + InitialCluster(a),
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + a.NamespaceDNS + "-" + a.Name,
		// torch's etcd rendezvous backends use the v2 API (python-etcd).
		"--enable-v2=true",
		"--auto-compaction-mode=revision",
		"--auto-compaction-retention=" + compactionRetention,
	}
}

// RenderStatefulSet builds the members. They start in parallel: with OrderedReady, member 0
// would wait for a quorum that members 1 and 2 are not yet allowed to form.
func RenderStatefulSet(a *Args) *appsv1.StatefulSetArgs {
	cmd := pulumi.StringArray{}
	for _, s := range Command(a) {
		cmd = append(cmd, pulumi.String(s))
	}
	claim := &corev1.PersistentVolumeClaimSpecArgs{
		AccessModes: pulumi.StringArray{pulumi.String("ReadWriteOnce")},
		Resources:   &corev1.VolumeResourceRequirementsArgs{Requests: pulumi.StringMap{"storage": pulumi.String(a.StorageSize)}},
	}
	switch {
	case a.StaticVolumes:
		claim.StorageClassName = pulumi.String("") // bind to the pre-created volume, never provision
	case a.StorageClass != "":
		claim.StorageClassName = pulumi.String(a.StorageClass)
	}
	return &appsv1.StatefulSetArgs{
		Metadata: a.Labels.ObjectMeta(a.Name, a.Namespace, Component),
		Spec: &appsv1.StatefulSetSpecArgs{
			Replicas:            pulumi.Int(a.Members),
			ServiceName:         pulumi.String(PeerService(a.Name)),
			PodManagementPolicy: pulumi.String("Parallel"),
			Selector:            &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(Component))},
			// The claims go with the StatefulSet: rendezvous state is not worth keeping, and a
			// claim left behind would pin its volume and stall `pulumi destroy`.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicyArgs{
				WhenDeleted: pulumi.String("Delete"),
				WhenScaled:  pulumi.String("Retain"),
			},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(Component))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.PodSecurity(0),
					NodeSelector:                 a.Labels.PoolSelector(a.Pool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					// Members on different nodes, where the pool allows it: one node's loss then
					// costs one member, not the quorum.
					Affinity: a.Labels.SpreadAcrossNodes(Component),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:    pulumi.String("etcd"),
						Image:   pulumi.String(a.Image),
						Command: cmd,
						Env: corev1.EnvVarArray{corev1.EnvVarArgs{
							Name:      pulumi.String("POD_NAME"),
							ValueFrom: &corev1.EnvVarSourceArgs{FieldRef: &corev1.ObjectFieldSelectorArgs{FieldPath: pulumi.String("metadata.name")}},
						}},
						Ports: corev1.ContainerPortArray{
							corev1.ContainerPortArgs{Name: pulumi.String("client"), ContainerPort: pulumi.Int(ClientPort)},
							corev1.ContainerPortArgs{Name: pulumi.String("peer"), ContainerPort: pulumi.Int(PeerPort)},
						},
						// /health answers true only when the member is in a cluster with a leader.
						ReadinessProbe: &corev1.ProbeArgs{
							HttpGet:          &corev1.HTTPGetActionArgs{Path: pulumi.String("/health"), Port: pulumi.Int(ClientPort)},
							PeriodSeconds:    pulumi.Int(5),
							FailureThreshold: pulumi.Int(3),
						},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String(a.CPU), "memory": pulumi.String(a.Memory)},
							Limits:   pulumi.StringMap{"cpu": pulumi.String(a.CPU), "memory": pulumi.String(a.Memory)},
						},
						SecurityContext: meta.LockedDown(),
						VolumeMounts: corev1.VolumeMountArray{corev1.VolumeMountArgs{
							Name: pulumi.String(volumeName), MountPath: pulumi.String(dataDir),
						}},
					}},
				},
			},
			// Claim templates are immutable: their labels leave out the version, so that an
			// upgrade of Kolotoc rolls the members instead of replacing the StatefulSet.
			VolumeClaimTemplates: corev1.PersistentVolumeClaimTypeArray{corev1.PersistentVolumeClaimTypeArgs{
				Metadata: &metav1.ObjectMetaArgs{
					Name:   pulumi.String(volumeName),
					Labels: pulumi.ToStringMap(a.Labels.Selector(Component)),
				},
				Spec: claim,
			}},
		},
	}
}
