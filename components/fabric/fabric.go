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
)

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
// the simulated cloud), tolerating the GPU taint, with the kubelet's device-plugins directory
// mounted and nothing else of the host; as the eks-charts chart runs it on GPU instances
// (every capability dropped, no privilege escalation).
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
					SecurityContext:              meta.PodSecurity(0),
					NodeSelector:                 sel,
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					Tolerations:                  corev1.TolerationArray{meta.GPUToleration()},
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String(PluginName),
						Image: pulumi.String(a.Image),
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("10m"), "memory": pulumi.String("20Mi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("100m"), "memory": pulumi.String("64Mi")},
						},
						SecurityContext: meta.LockedDown(),
						VolumeMounts: corev1.VolumeMountArray{corev1.VolumeMountArgs{
							Name: pulumi.String("device-plugin"), MountPath: pulumi.String(devicePluginsDir),
						}},
					}},
					Volumes: corev1.VolumeArray{corev1.VolumeArgs{
						Name:     pulumi.String("device-plugin"),
						HostPath: &corev1.HostPathVolumeSourceArgs{Path: pulumi.String(devicePluginsDir)},
					}},
				},
			},
		},
	}
}
