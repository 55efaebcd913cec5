package stacks

import (
	"strings"

	"kolotoc/components/fabric"
	"kolotoc/components/meta"
)

// Images used when a stack names none. Each is pinned by a tag that exists upstream; `:latest`
// and tagless images are refused by validation, so a second `pulumi up` never pulls something new.
const (
	// The device plugin's newest release found (v0.19.0, 2026-04; v0.17.0 before). Not run
	// here (no GPU): Kolotoc sets what upstream's static DaemonSet sets (FAIL_ON_INIT_ERROR, the
	// kubelet's device-plugins directory), which v0.19.0's release notes do not change.
	DefaultDevicePluginImage = "nvcr.io/nvidia/k8s-device-plugin:v0.19.0"
)

// Defaults that fill zero values. Each says its unit and why.
const (
	// defaultPoolCPUs, defaultPoolMemory: a pool that says nothing is an 8-core, 32 GiB node.
	defaultPoolCPUs   = 8
	defaultPoolMemory = "32Gi"
	// defaultEFARegion: the EKS registry region of the EFA device plugin's image on a simulated
	// stack that names no region (its image is never pulled there: kwok plays the nodes).
	defaultEFARegion = "us-east-1"
)

// applyDefaults fills zero values only, so it is idempotent: applying it twice changes nothing.
func (c *Config) applyDefaults() {
	if c.Namespace == "" && c.Stack != "" {
		c.Namespace = "kolotoc-" + strings.ToLower(c.Stack)
	}
	if c.Cluster.Name == "" && c.Stack != "" {
		c.Cluster.Name = "kolotoc-" + strings.ToLower(c.Stack)
	}
	c.applyTimeoutDefaults()
	c.applyCloudDefaults()  // machine-type figures and the cloud's keys first, before the generic pool defaults below
	c.applyFabricDefaults() // after the machine-type figures: a GPU machine type's pool is compact
	c.applyRunDefaults()
	for i := range c.NodePools {
		p := &c.NodePools[i]
		p.applyPoolSizeDefaults() // autoscale.go
		meta.Fill(&p.CPUs, defaultPoolCPUs)
		meta.Fill(&p.Memory, defaultPoolMemory)
	}

	c.applyStorageDefaults() // storage.go

	meta.Fill(&c.DevicePlugin.Image, DefaultDevicePluginImage)
	c.applyGPUAgentDefaults() // who runs the device plugin and the DCGM exporter (gpuagents.go)
	if c.Fabric.EFAPluginImage == "" && c.EFAPools() {
		region := c.Cluster.Region
		meta.Fill(&region, defaultEFARegion)
		c.Fabric.EFAPluginImage = fabric.DefaultPluginImage(region)
	}
	c.applyWorkloadDefaults() // each workload's section, from the pools and the sections before it (workloads.go)
	c.applyQueueDefaults()    // queue.go
}

// Pool returns the node pool of that name, or nil.
func (c *Config) Pool(name string) *NodePool {
	for i := range c.NodePools {
		if c.NodePools[i].Name == name {
			return &c.NodePools[i]
		}
	}
	return nil
}

// pools are the node pools as the workload sections' defaults read them.
func (c *Config) pools() meta.Pools {
	out := make(meta.Pools, 0, len(c.NodePools))
	for _, p := range c.NodePools {
		out = append(out, meta.Pool{Name: p.Name, GPUsPerNode: p.GPUsPerNode, CPUs: p.CPUs, Memory: p.Memory})
	}
	return out
}

// firstPool returns the first GPU pool (gpu true) or the first CPU pool (gpu false), by the rule
// every section's defaults follow (meta.Pools.First); nil if none.
func (c *Config) firstPool(gpu bool) *NodePool { return c.Pool(c.pools().First(gpu)) }
