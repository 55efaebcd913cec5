// Package deviceplugin runs the NVIDIA device plugin, which advertises each node's GPUs to the
// kubelet as nvidia.com/gpu. It runs on GPU nodes only and tolerates their taint.
package deviceplugin

import (
	"errors"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// Name of the DaemonSet and the component label of its pods.
const Name = "nvidia-device-plugin"

// Args are the device plugin's inputs.
type Args struct {
	Namespace pulumi.StringInput // where the DaemonSet lives
	Image     string             // pinned device plugin image
	Labels    meta.Labels
}

// DevicePlugin is the NVIDIA device plugin DaemonSet.
type DevicePlugin struct {
	pulumi.ResourceState
	DaemonSet *appsv1.DaemonSet
}

// New registers the device plugin DaemonSet.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*DevicePlugin, error) {
	if args == nil {
		return nil, errors.New("deviceplugin: args are required")
	}
	d := &DevicePlugin{}
	if err := ctx.RegisterComponentResource("kolotoc:deviceplugin:DevicePlugin", name, d, opts...); err != nil {
		return nil, fmt.Errorf("deviceplugin %q: %w", name, err)
	}
	ds, err := appsv1.NewDaemonSet(ctx, name, RenderDaemonSet(args), pulumi.Parent(d))
	if err != nil {
		return nil, fmt.Errorf("deviceplugin %q: DaemonSet %q: %w", name, name, err)
	}
	d.DaemonSet = ds
	return d, meta.RegisterOutputs(ctx, d, pulumi.Map{"name": ds.Metadata.Name()})
}

// RenderDaemonSet builds the DaemonSet: selected onto nodes labelled nvidia.com/gpu.present=true,
// tolerating the GPU taint, with the kubelet's device-plugin socket directory mounted.
func RenderDaemonSet(a *Args) *appsv1.DaemonSetArgs {
	return &appsv1.DaemonSetArgs{
		Metadata: a.Labels.ObjectMeta(Name, a.Namespace, Name),
		Spec: &appsv1.DaemonSetSpecArgs{
			Selector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(Name))},
			UpdateStrategy: &appsv1.DaemonSetUpdateStrategyArgs{
				Type: pulumi.String("RollingUpdate"),
			},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(Name))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.PodSecurity(0),
					NodeSelector:                 a.Labels.GPUNodeSelector(),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					Tolerations:                  corev1.TolerationArray{meta.GPUToleration()},
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String("nvidia-device-plugin"),
						Image: pulumi.String(a.Image),
						Env: corev1.EnvVarArray{
							// Keep running on a node whose driver is not ready yet: it retries
							// instead of crash-looping while GKE's driver installer finishes.
							corev1.EnvVarArgs{Name: pulumi.String("FAIL_ON_INIT_ERROR"), Value: pulumi.String("false")},
						},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("50m"), "memory": pulumi.String("64Mi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("500m"), "memory": pulumi.String("256Mi")},
						},
						SecurityContext: meta.LockedDown(),
						VolumeMounts: corev1.VolumeMountArray{corev1.VolumeMountArgs{
							Name: pulumi.String("device-plugin"), MountPath: pulumi.String("/var/lib/kubelet/device-plugins"),
						}},
					}},
					Volumes: corev1.VolumeArray{corev1.VolumeArgs{
						Name:     pulumi.String("device-plugin"),
						HostPath: &corev1.HostPathVolumeSourceArgs{Path: pulumi.String("/var/lib/kubelet/device-plugins")},
					}},
				},
			},
		},
	}
}
