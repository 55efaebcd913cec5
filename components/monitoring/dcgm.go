package monitoring

import (
	"fmt"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// How the DCGM exporter reaches the GPUs on each GPU node image. It requests no GPU (that would
// take one from training), so it sees the driver and the devices only by what the node gives a
// container that asks for none:
//
//   - With the NVIDIA Container Toolkit as the node's runtime (EKS's AL2023 NVIDIA AMI, AKS's
//     Ubuntu GPU nodes, a cluster run by NVIDIA's GPU Operator), NVIDIA_VISIBLE_DEVICES=all asks
//     the runtime for every GPU and the driver's libraries; CAP_SYS_ADMIN is all DCGM adds.
//   - On GKE (Container-Optimized OS) the runtime injects nothing: the driver lives in a host
//     directory, and the devices are the host's. GKE's own exporter manifest mounts that directory
//     at /usr/local/nvidia, points LD_LIBRARY_PATH at its lib64 and runs privileged; Kolotoc does
//     the same.

// GPUNodes is what the DCGM exporter must know of the GPU nodes' image. The zero value is a node
// whose container runtime is the NVIDIA Container Toolkit and whose device plugin is NVIDIA's.
type GPUNodes struct {
	// DriverHostDir: the host directory of a driver the runtime does not inject, holding lib64/
	// and bin/ (GKE installs it under /home/kubernetes/bin/nvidia); the exporter mounts it at
	// DriverMountPath and runs privileged to open the GPU devices; default "": the runtime
	// injects the driver.
	DriverHostDir string
	// DeviceIDs: how the node's device plugin names GPUs to the kubelet's pod-resources API,
	// DeviceIDsUUID (NVIDIA's plugin) or DeviceIDsName (GKE's); the exporter maps GPUs to pods by
	// it; default DeviceIDsUUID.
	DeviceIDs string
}

// Values of GPUNodes.DeviceIDs: dcgm-exporter's --kubernetes-gpu-id-type.
const (
	DeviceIDsUUID = "uid"         // GPU UUIDs, as NVIDIA's device plugin reports them
	DeviceIDsName = "device-name" // device names (nvidia0, …), as GKE's device plugin reports them
)

// DriverMountPath is where the exporter sees GPUNodes.DriverHostDir: the path GKE's manifests use,
// whose lib64 the exporter's LD_LIBRARY_PATH names.
const DriverMountPath = "/usr/local/nvidia"

// podResourcesDir is the kubelet's pod-resources socket directory: which pod holds which GPU.
const podResourcesDir = "/var/lib/kubelet/pod-resources"

// dcgmDriver is the exporter's environment, mounts and volumes on nodes n.
func dcgmDriver(n GPUNodes) (corev1.EnvVarArray, corev1.VolumeMountArray, corev1.VolumeArray) {
	ids := n.DeviceIDs
	if ids == "" {
		ids = DeviceIDsUUID
	}
	env := corev1.EnvVarArray{
		corev1.EnvVarArgs{Name: pulumi.String("DCGM_EXPORTER_LISTEN"), Value: pulumi.String(fmt.Sprintf(":%d", DCGMPort))},
		// Label each GPU's metrics with the pod that holds it, matched by the plugin's GPU names.
		corev1.EnvVarArgs{Name: pulumi.String("DCGM_EXPORTER_KUBERNETES"), Value: pulumi.String("true")},
		corev1.EnvVarArgs{Name: pulumi.String("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"), Value: pulumi.String(ids)},
		// Report the node name as the Hostname label rather than the pod's.
		corev1.EnvVarArgs{Name: pulumi.String("NODE_NAME"), ValueFrom: &corev1.EnvVarSourceArgs{
			FieldRef: &corev1.ObjectFieldSelectorArgs{FieldPath: pulumi.String("spec.nodeName")},
		}},
	}
	mounts := corev1.VolumeMountArray{corev1.VolumeMountArgs{
		Name: pulumi.String("pod-resources"), MountPath: pulumi.String(podResourcesDir), ReadOnly: pulumi.Bool(true),
	}}
	volumes := corev1.VolumeArray{corev1.VolumeArgs{
		Name:     pulumi.String("pod-resources"),
		HostPath: &corev1.HostPathVolumeSourceArgs{Path: pulumi.String(podResourcesDir)},
	}}
	if n.DriverHostDir == "" {
		// The toolkit injects every GPU and the driver's libraries into a container that asks.
		env = append(env, corev1.EnvVarArgs{Name: pulumi.String("NVIDIA_VISIBLE_DEVICES"), Value: pulumi.String("all")})
		return env, mounts, volumes
	}
	env = append(env, corev1.EnvVarArgs{Name: pulumi.String("LD_LIBRARY_PATH"), Value: pulumi.String(DriverMountPath + "/lib64")})
	mounts = append(mounts, corev1.VolumeMountArgs{
		Name: pulumi.String("nvidia-driver"), MountPath: pulumi.String(DriverMountPath), ReadOnly: pulumi.Bool(true),
	})
	volumes = append(volumes, corev1.VolumeArgs{
		Name:     pulumi.String("nvidia-driver"),
		HostPath: &corev1.HostPathVolumeSourceArgs{Path: pulumi.String(n.DriverHostDir), Type: pulumi.String("Directory")},
	})
	return env, mounts, volumes
}

// dcgmSecurity is the exporter container's security context on nodes n. DCGM's profiling metrics
// need CAP_SYS_ADMIN (NVIDIA's own manifests grant the same). Where the runtime injects no device
// (a host driver directory), the GPU devices are reachable only privileged, as GKE's manifest
// runs it.
func dcgmSecurity(n GPUNodes) *corev1.SecurityContextArgs {
	if n.DriverHostDir != "" {
		return &corev1.SecurityContextArgs{RunAsUser: pulumi.Int(0), Privileged: pulumi.Bool(true)}
	}
	return &corev1.SecurityContextArgs{
		RunAsUser: pulumi.Int(0),
		Capabilities: &corev1.CapabilitiesArgs{
			Drop: pulumi.StringArray{pulumi.String("ALL")},
			Add:  pulumi.StringArray{pulumi.String("SYS_ADMIN")},
		},
	}
}
