// Package fabric gives GPU nodes the fast network between them that their machine type has, as
// far as Kubernetes sees it: on AWS, Elastic Fabric Adapter interfaces, which the EFA device
// plugin advertises to the kubelet as vpc.amazonaws.com/efa and which a rank requests beside its
// GPUs, and the environment NCCL needs to use them. The interfaces themselves, the placement
// group and the security group are the cloud's (components/cloud/eks).
package fabric

import (
	"errors"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// EFAResource is the extended resource the EFA device plugin advertises, one per interface
	// (Amazon EKS, "Manage EFA devices on Amazon EKS", EFA device plugin).
	EFAResource = "vpc.amazonaws.com/efa"
	// Label marks the nodes of a pool with a fabric, value its kind (EFA); the EFA device plugin
	// selects on it. Kolotoc sets it with the pool's other labels, on every cloud.
	Label = "kolotoc.dev/fabric"
	// EFA is Label's value on nodes with EFA interfaces.
	EFA = "efa"
	// PluginName names the EFA device plugin's DaemonSet and component label.
	PluginName = "efa-device-plugin"
	// PluginVersion is the EFA device plugin release (eks-charts' aws-efa-k8s-device-plugin
	// chart's image tag, v0.5.8). Its image lives in each region's EKS registry.
	PluginVersion = "v0.5.8"
	// pluginRegistryAccount is the account of the EKS add-on image registry in most regions
	// (Amazon EKS, "View Amazon container image registries for Amazon EKS add-ons"); the few
	// opt-in regions with an account of their own need kolotoc:fabric.efaPluginImage.
	pluginRegistryAccount = "602401143452"
	// devicePluginsDir is the kubelet's device plugin socket directory.
	devicePluginsDir = "/var/lib/kubelet/device-plugins"
	// infinibandDir holds the node's EFA (verbs) devices, which the plugin finds and hands out.
	infinibandDir = "/dev/infiniband"
	// pluginPriorityClass is the built-in class of node agents a node's pods depend on.
	pluginPriorityClass = "system-node-critical"

	// HugePagesResource is the huge page size libfabric's EFA provider allocates its buffers
	// from, which a pod on EFA requests beside its interfaces.
	HugePagesResource = "hugepages-2Mi"
	// NodeHugePagesMi is the 2 MiB huge pages a pod holding a whole EFA node requests (MiB), as
	// AWS's EKS EFA example does (aws-ia terraform-aws-eks-blueprints, patterns/nvidia-gpu-efa,
	// generate-efa-nccl-test.sh: hugepages-2Mi 5120Mi beside all 32 EFAs of a p5.48xlarge). A pod
	// holding part of a node takes the same part of it, so a node's pods never ask for more.
	NodeHugePagesMi = 5120
)

// Share is what one pod takes of its node's fabric: its part of the node's devices (EFA
// interfaces), the huge pages they need, and the environment NCCL needs to use them, which every
// rank gets. Towers, elastic workers and TF workers take it alike.
type Share struct {
	Resource  string            // extended resource each pod requests, e.g. vpc.amazonaws.com/efa; "" for none
	PerPod    int               // how many of it
	HugePages string            // HugePagesResource each pod requests (a quantity, e.g. 5120Mi); "" for none
	Env       map[string]string // NCCL's environment on the fabric
}

// HugePages is the huge pages (HugePagesResource) a pod holding gpus of its node's gpusPerNode
// GPUs requests: that part of NodeHugePagesMi, in whole 2 MiB pages.
func HugePages(gpus, gpusPerNode int) string {
	if gpus < 1 || gpusPerNode < 1 {
		return ""
	}
	mi := NodeHugePagesMi * min(gpus, gpusPerNode) / gpusPerNode
	return fmt.Sprintf("%dMi", mi-mi%2)
}

// AddTo requests the share's devices and huge pages in a container's requests and limits, each
// limit equal to its request: extended resources cannot be overcommitted, and Kubernetes
// refuses huge page requests that differ from their limits ("Manage HugePages").
func (s Share) AddTo(requests, limits pulumi.StringMap) {
	for name, q := range s.Requests() {
		requests[name], limits[name] = pulumi.String(q), pulumi.String(q)
	}
}

// Requests is what one pod requests of the fabric, by resource name; empty without a fabric.
func (s Share) Requests() map[string]string {
	out := map[string]string{}
	if s.Resource != "" && s.PerPod > 0 {
		out[s.Resource] = fmt.Sprint(s.PerPod)
		if s.HugePages != "" {
			out[HugePagesResource] = s.HugePages
		}
	}
	return out
}

// EnvArray is the share's environment, sorted by name.
func (s Share) EnvArray() corev1.EnvVarArray {
	var out corev1.EnvVarArray
	for _, k := range meta.SortedKeys(s.Env) {
		out = append(out, corev1.EnvVarArgs{Name: pulumi.String(k), Value: pulumi.String(s.Env[k])})
	}
	return out
}

// DefaultPluginImage is the EFA device plugin's image in an AWS region's EKS registry.
func DefaultPluginImage(region string) string {
	return fmt.Sprintf("%s.dkr.ecr.%s.amazonaws.com/eks/aws-efa-k8s-device-plugin:%s", pluginRegistryAccount, region, PluginVersion)
}

// EFAEnv is the environment every NCCL rank on EFA nodes needs (AWS, "Get started with EFA and
// NCCL for ML workloads on Amazon EC2", and aws-ofi-nccl's documentation): libfabric's EFA
// provider, fork safety for the DataLoader's worker processes, and, where the instance has it,
// GPUDirect RDMA.
func EFAEnv(rdma bool) map[string]string {
	env := map[string]string{"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1"}
	if rdma {
		env["FI_EFA_USE_DEVICE_RDMA"] = "1"
	}
	return env
}

// Args are the EFA device plugin's inputs.
type Args struct {
	Namespace pulumi.StringInput // the GPU agents' namespace
	Image     string             // pinned plugin image
	Labels    meta.Labels
}

// Plugin is the EFA device plugin DaemonSet.
type Plugin struct {
	pulumi.ResourceState
	DaemonSet *appsv1.DaemonSet
}

// NewPlugin registers the EFA device plugin.
func NewPlugin(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Plugin, error) {
	if args == nil {
		return nil, errors.New("fabric: args are required")
	}
	p := &Plugin{}
	if err := ctx.RegisterComponentResource("kolotoc:fabric:EFADevicePlugin", name, p, opts...); err != nil {
		return nil, fmt.Errorf("fabric %q: %w", name, err)
	}
	ds, err := appsv1.NewDaemonSet(ctx, name, RenderPlugin(args), pulumi.Parent(p))
	if err != nil {
		return nil, fmt.Errorf("fabric %q: %w", name, err)
	}
	p.DaemonSet = ds
	return p, meta.RegisterOutputs(ctx, p, pulumi.Map{"name": ds.Metadata.Name()})
}

// RenderPlugin builds the DaemonSet: on nodes labelled Label=EFA (of this stack's cluster, on
// the simulated cloud), as upstream's chart runs it (eks-charts, stable/aws-efa-k8s-device-plugin,
// templates/daemonset.yaml, the chart of PluginVersion): on the node's network, with the
// kubelet's device-plugins directory and the node's /dev/infiniband (the EFA devices it
// advertises) mounted, at priority system-node-critical (the kubelet evicts it last, and the
// scheduler preempts for it: without it no pod gets an interface), tolerating CriticalAddonsOnly
// and the GPU taint, every capability dropped and no privilege escalation (the chart's
// securityContext for GPU instances). The chart's /opt/aws/neuron mount serves Neuron instances
// only, which Kolotoc does not run.
func RenderPlugin(a *Args) *appsv1.DaemonSetArgs {
	sel := pulumi.StringMap{Label: pulumi.String(EFA)}
	if a.Labels.Cluster != "" {
		sel[meta.ClusterLabel] = pulumi.String(a.Labels.Cluster)
	}
	return &appsv1.DaemonSetArgs{
		Metadata: a.Labels.ObjectMeta(PluginName, a.Namespace, PluginName),
		Spec: &appsv1.DaemonSetSpecArgs{
			Selector:       &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(PluginName))},
			UpdateStrategy: &appsv1.DaemonSetUpdateStrategyArgs{Type: pulumi.String("RollingUpdate")},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(PluginName))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:   meta.PodSecurity(0),
					NodeSelector:      sel,
					ImagePullSecrets:  a.Labels.ImagePullSecrets(),
					HostNetwork:       pulumi.Bool(true),
					PriorityClassName: pulumi.String(pluginPriorityClass),
					Tolerations: corev1.TolerationArray{
						corev1.TolerationArgs{Key: pulumi.String("CriticalAddonsOnly"), Operator: pulumi.String("Exists")},
						meta.GPUToleration(),
					},
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String(PluginName),
						Image: pulumi.String(a.Image),
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("10m"), "memory": pulumi.String("20Mi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("100m"), "memory": pulumi.String("64Mi")},
						},
						SecurityContext: meta.LockedDown(),
						VolumeMounts: corev1.VolumeMountArray{
							corev1.VolumeMountArgs{Name: pulumi.String("device-plugin"), MountPath: pulumi.String(devicePluginsDir)},
							corev1.VolumeMountArgs{Name: pulumi.String("infiniband"), MountPath: pulumi.String(infinibandDir)},
						},
					}},
					Volumes: corev1.VolumeArray{
						corev1.VolumeArgs{
							Name:     pulumi.String("device-plugin"),
							HostPath: &corev1.HostPathVolumeSourceArgs{Path: pulumi.String(devicePluginsDir)},
						},
						corev1.VolumeArgs{
							Name:     pulumi.String("infiniband"),
							HostPath: &corev1.HostPathVolumeSourceArgs{Path: pulumi.String(infinibandDir)},
						},
					},
				},
			},
		},
	}
}
