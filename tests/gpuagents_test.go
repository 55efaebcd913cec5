package tests

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"kolotoc/stacks"
)

// The GPU node agents on each cloud's GPU node image and beside NVIDIA's GPU Operator: the DCGM
// exporter reaches the driver the way the node image needs, and no GPU node runs two device
// plugins. Nothing here runs on a GPU: each check names the vendor's document it follows.

// monitoringOn turns monitoring on without Grafana (which would need its password).
var monitoringOn = map[string]string{"monitoring": `{"enabled":true,"grafana":false}`}

// dcgmPod is the DCGM exporter's pod spec, its first container's env by name, and its host paths
// by volume name.
func dcgmPod(t *testing.T, rec *recorder) (container corev1.Container, env map[string]string, hostPaths map[string]string) {
	t.Helper()
	pod := templateOf(t, rec.one(t, tDaemonSet, "monitoring-dcgm-exporter")).Spec
	container = pod.Containers[0]
	hostPaths = map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	return container, envValues(container), hostPaths
}

// mountPathOf is where container mounts volume; "" if it does not.
func mountPathOf(container corev1.Container, volume string) string {
	for _, m := range container.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

// deviceDaemonSets are the registered DaemonSets running NVIDIA's device plugin image.
func deviceDaemonSets(t *testing.T, rec *recorder) []string {
	t.Helper()
	var out []string
	for _, ds := range rec.ofType(tDaemonSet) {
		img := templateOf(t, ds).Spec.Containers[0].Image
		// NVIDIA's (k8s-device-plugin), not the EFA device plugin (aws-efa-k8s-device-plugin),
		// which advertises network interfaces, not GPUs.
		if strings.Contains(img, "nvidia/k8s-device-plugin") {
			out = append(out, ds.Name)
		}
	}
	return out
}

// TestDCGMPerCloud: the exporter sees the driver on each cloud's GPU node image.
func TestDCGMPerCloud(t *testing.T) {
	// GKE: the driver is GKE's, under /home/kubernetes/bin/nvidia on the host, and no NVIDIA
	// runtime injects it. Followed: "Install the DCGM Exporter" in
	// https://cloud.google.com/stackdriver/docs/managed-prometheus/exporters/nvidia-dcgm (its
	// manifest: GoogleCloudPlatform/prometheus-engine examples/nvidia-dcgm/exporter.yaml):
	// hostPath /home/kubernetes/bin/nvidia at /usr/local/nvidia, LD_LIBRARY_PATH
	// /usr/local/nvidia/lib64, privileged: true, DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE=device-name.
	t.Run("gcp", func(t *testing.T) {
		c, env, paths := dcgmPod(t, cloudRec(t, "prod", monitoringOn))
		if paths["nvidia-driver"] != "/home/kubernetes/bin/nvidia" || mountPathOf(c, "nvidia-driver") != "/usr/local/nvidia" {
			t.Errorf("GKE's driver directory is not mounted at /usr/local/nvidia: host paths %v, mount %v", paths, mountPathOf(c, "nvidia-driver"))
		}
		for k, want := range map[string]string{"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE": "device-name"} {
			if env[k] != want {
				t.Errorf("%s = %v, want %v", k, env[k], want)
			}
		}
		if c.SecurityContext == nil || !isTrue(c.SecurityContext.Privileged) {
			t.Errorf("not privileged, so the GPU devices stay closed to it: %+v", c.SecurityContext)
		}
		_, reqGPU := c.Resources.Requests["nvidia.com/gpu"]
		_, limGPU := c.Resources.Limits["nvidia.com/gpu"]
		if reqGPU || limGPU {
			t.Error("the exporter takes a GPU from training")
		}
	})
	// EKS (AL2023 NVIDIA AMI) and AKS (Ubuntu GPU nodes) have the driver and the NVIDIA Container
	// Toolkit: https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html
	// ("EKS-optimized NVIDIA AMIs"), https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/microsoft-aks.html
	// ("Default AKS configuration without the GPU Operator": "AKS images include a preinstalled
	// NVIDIA GPU Driver and preinstalled NVIDIA Container Toolkit"). A container asking for no GPU
	// gets every one by NVIDIA_VISIBLE_DEVICES=all (Container Toolkit, "GPU Enumeration"); NVIDIA's
	// plugin names GPUs by UUID (dcgm-exporter's default "uid").
	for _, name := range []string{"aws", "azure"} {
		t.Run(name, func(t *testing.T) {
			c, env, paths := dcgmPod(t, cloudRec(t, name, monitoringOn))
			for k, want := range map[string]string{"NVIDIA_VISIBLE_DEVICES": "all", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE": "uid"} {
				if env[k] != want {
					t.Errorf("%s = %v, want %v", k, env[k], want)
				}
			}
			if d := cmp.Diff(map[string]string{"pod-resources": "/var/lib/kubelet/pod-resources"}, paths); d != "" {
				t.Errorf("host paths (-want +got): the runtime injects the driver:\n%s", d)
			}
			if c.SecurityContext != nil && isTrue(c.SecurityContext.Privileged) {
				t.Error("privileged where the runtime injects the devices")
			}
		})
	}
}

// configErrors loads raw and returns its problems by key.
func configErrors(t *testing.T, raw stacks.Raw) map[string]stacks.FieldError {
	t.Helper()
	_, err := stacks.Load(raw)
	var ce *stacks.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("loaded without a configuration error (%v)", err)
	}
	out := map[string]stacks.FieldError{}
	for _, e := range ce.Errors {
		out[e.Key] = e
	}
	return out
}

// TestOneDevicePluginPerNode: Kolotoc runs NVIDIA's device plugin only where nothing else does.
func TestOneDevicePluginPerNode(t *testing.T) {
	// GKE runs its own plugin on every GPU node: "Verify that the NVIDIA GPU device plugin is
	// running: kubectl get pods -n kube-system | grep nvidia-gpu-device-plugin", in
	// https://cloud.google.com/stackdriver/docs/managed-prometheus/exporters/nvidia-dcgm
	// ("Prerequisites"), and https://cloud.google.com/kubernetes-engine/docs/how-to/gpus ("About
	// the NVIDIA GPU device plugin": GKE installs it). Kolotoc's, asked for, is refused.
	t.Run("gcp: none of Kolotoc's, and asking for one is refused", func(t *testing.T) {
		if ds := deviceDaemonSets(t, cloudRec(t, "prod", nil)); len(ds) != 0 {
			t.Errorf("device plugin DaemonSets %v beside GKE's", ds)
		}
		for key, override := range map[string]string{
			"devicePlugin.enabled":  `{"enabled":true}`,
			"devicePlugin.provider": `{"provider":"kolotoc"}`,
		} {
			errs := configErrors(t, cloudRaw(t, "prod", map[string]string{"devicePlugin": override}))
			if e, ok := errs[key]; !ok || !strings.Contains(e.Msg, "allowed:") {
				t.Errorf("%s: want a problem naming what is allowed, got %v", override, errs)
			}
		}
	})
	// EKS's AL2023 NVIDIA AMI: "you must install the NVIDIA Kubernetes device plugin"
	// (https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-k8s-device-plugin.html,
	// "Considerations"). AKS: the driver and toolkit are preinstalled, the plugin is not
	// (https://learn.microsoft.com/azure/aks/gpu-cluster, "NVIDIA device plugin installation").
	for _, name := range []string{"aws", "azure"} {
		t.Run(name+": Kolotoc's", func(t *testing.T) {
			if d := cmp.Diff([]string{"device-plugin"}, deviceDaemonSets(t, cloudRec(t, name, nil))); d != "" {
				t.Errorf("device plugin DaemonSets (-want +got):\n%s", d)
			}
			errs := configErrors(t, cloudRaw(t, name, map[string]string{"devicePlugin": `{"provider":"gpuOperator"}`}))
			if e := errs["devicePlugin.provider"]; e.Value != "gpuOperator" || !strings.Contains(e.Msg, "allowed: kolotoc") {
				t.Errorf("provider gpuOperator on %s: %v", name, errs)
			}
		})
	}
	t.Run("a provider that does not exist", func(t *testing.T) {
		errs := configErrors(t, workloadsRaw(t, map[string]string{"cloud": "existing", "devicePlugin": `{"provider":"nvidia"}`}))
		if e := errs["devicePlugin.provider"]; e.Value != "nvidia" || !strings.Contains(e.Msg, "kolotoc, gke, gpuOperator") {
			t.Errorf("provider nvidia: %v", errs)
		}
	})

	// An existing cluster run by NVIDIA's GPU Operator: the operator deploys the device plugin and
	// the DCGM exporter itself (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html,
	// "Common Chart Customization Options": devicePlugin.enabled, dcgmExporter.enabled, both true
	// by default). Kolotoc runs neither, and so no GPU agents' namespace.
	existing := func(devicePlugin, monitoring string) map[string]string {
		ov := map[string]string{"cloud": "existing", "devicePlugin": devicePlugin}
		if monitoring != "" {
			ov["monitoring"] = monitoring
		}
		return ov
	}
	t.Run("existing with the GPU Operator: no plugin, no exporter of Kolotoc's", func(t *testing.T) {
		rec := deploy(t, workloadsRaw(t, existing(`{"provider":"gpuOperator"}`, "")))
		if n := len(rec.ofType(tDaemonSet)); n != 0 {
			t.Errorf("%d DaemonSets beside the GPU Operator's plugin and exporter", n)
		}
		for _, ns := range rec.ofType(tNamespace) {
			if strings.HasSuffix(ns.Name, stacks.GPUAgentsSuffix) {
				t.Errorf("namespace %s with no agent to run", ns.Name)
			}
		}
		prom := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "monitoring-prometheus")).Data["prometheus.yml"]
		if strings.Contains(prom, "job_name: dcgm-exporter") {
			t.Error("Prometheus scrapes an exporter Kolotoc does not run")
		}
		errs := configErrors(t, workloadsRaw(t, existing(`{"provider":"gpuOperator","enabled":true}`, "")))
		if e := errs["devicePlugin.enabled"]; e.Value != "true" || !strings.Contains(e.Msg, "allowed: false") {
			t.Errorf("enabled beside the operator's plugin: %v", errs)
		}
	})
	t.Run("existing with the GPU Operator, the exporter asked for: the toolkit's way", func(t *testing.T) {
		rec := deploy(t, workloadsRaw(t, existing(`{"provider":"gpuOperator"}`, `{"enabled":true,"dcgmExporter":true}`)))
		if ds := deviceDaemonSets(t, rec); len(ds) != 0 {
			t.Errorf("device plugin DaemonSets %v beside the operator's", ds)
		}
		if _, env, _ := dcgmPod(t, rec); env["NVIDIA_VISIBLE_DEVICES"] != "all" {
			t.Errorf("NVIDIA_VISIBLE_DEVICES = %v: the operator's toolkit injects the GPUs it names", env["NVIDIA_VISIBLE_DEVICES"])
		}
	})
	t.Run("existing, unsaid: Kolotoc's plugin", func(t *testing.T) {
		if d := cmp.Diff([]string{"device-plugin"}, deviceDaemonSets(t, deploy(t, workloadsRaw(t, existing(`{}`, ""))))); d != "" {
			t.Errorf("device plugin DaemonSets (-want +got):\n%s", d)
		}
	})
}
