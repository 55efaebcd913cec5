package stacks

import (
	"slices"
	"strings"

	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
)

// The GPU node agents (the NVIDIA device plugin and the DCGM exporter) and who else may run them.
// A GPU node must run exactly one device plugin: two would each advertise the node's GPUs to the
// kubelet as nvidia.com/gpu. GKE runs its own on every GPU node, and NVIDIA's GPU Operator runs
// its own (and its own DCGM exporter) on a cluster it manages; Kolotoc then runs neither.

// Who runs the device plugin: kolotoc:devicePlugin.provider.
const (
	// DevicePluginKolotoc: Kolotoc runs NVIDIA's device plugin (the EKS AL2023 NVIDIA AMI and
	// AKS's GPU nodes have the driver and the NVIDIA Container Toolkit, but no plugin).
	DevicePluginKolotoc = "kolotoc"
	// DevicePluginGKE: GKE's own plugin (kube-system/nvidia-gpu-device-plugin), which GKE runs
	// on every GPU node; the driver is GKE's, under gkeDriverHostDir.
	DevicePluginGKE = "gke"
	// DevicePluginGPUOperator: NVIDIA's GPU Operator runs the plugin and its own DCGM exporter
	// (a cluster that already runs it: cloud existing only).
	DevicePluginGPUOperator = "gpuOperator"
)

var allowedDevicePlugins = []string{DevicePluginKolotoc, DevicePluginGKE, DevicePluginGPUOperator}

// gkeDriverHostDir is where GKE installs the NVIDIA driver on a GPU node (Container-Optimized OS
// and Ubuntu alike), with its lib64/ and bin/; the runtime injects none of it.
const gkeDriverHostDir = "/home/kubernetes/bin/nvidia"

// applyGPUAgentDefaults fills devicePlugin.provider (the cloud's default), devicePlugin.enabled
// (on with a GPU pool when Kolotoc provides the plugin) and, with the GPU Operator, turns
// Kolotoc's DCGM exporter off unless monitoring.dcgmExporter says otherwise: the operator runs its
// own. Zero values only.
func (c *Config) applyGPUAgentDefaults() {
	d := &c.DevicePlugin
	if allowed := c.CloudEntry().DevicePlugins; len(allowed) > 0 { // the cloud's (its entry's DevicePlugins)
		meta.Fill(&d.Provider, allowed[0])
	}
	meta.Fill(&d.Provider, DevicePluginKolotoc)
	meta.FillPtr(&d.Enabled, d.Provider == DevicePluginKolotoc && c.firstPool(true) != nil)
	if d.Provider == DevicePluginGPUOperator {
		meta.FillPtr(&c.Monitoring.DCGMExporter, false)
	}
}

// validateGPUAgents: a provider the cloud allows, and no device plugin of Kolotoc's beside
// another's.
func (c *Config) validateGPUAgents(v *Validator) {
	d := c.DevicePlugin
	v.oneOf("devicePlugin.provider", d.Provider, allowedDevicePlugins)
	if cl := c.CloudEntry(); cl.DevicePlugins != nil && !slices.Contains(cl.DevicePlugins, d.Provider) && slices.Contains(allowedDevicePlugins, d.Provider) {
		v.add("devicePlugin.provider", d.Provider, "not with cloud "+c.Cloud+": "+cl.DevicePluginsWhy+"; allowed: "+strings.Join(cl.DevicePlugins, ", "))
	}
	if d.Enabled != nil && *d.Enabled && d.Provider != DevicePluginKolotoc {
		v.add("devicePlugin.enabled", "true", "provider "+d.Provider+" already runs a device plugin on the GPU nodes; a second would advertise "+
			"the same GPUs twice; allowed: false, or provider "+DevicePluginKolotoc)
	}
}

// GPUNodes is what the DCGM exporter must know of the GPU node image, by who provides the device
// plugin: GKE's nodes keep the driver in a host directory and name GPUs by device; every other
// provider's nodes run the NVIDIA Container Toolkit and NVIDIA's plugin, which names them by UUID.
func (c *Config) GPUNodes() monitoring.GPUNodes {
	if c.DevicePlugin.Provider == DevicePluginGKE {
		return monitoring.GPUNodes{DriverHostDir: gkeDriverHostDir, DeviceIDs: monitoring.DeviceIDsName}
	}
	return monitoring.GPUNodes{DeviceIDs: monitoring.DeviceIDsUUID}
}
