package stacks

import (
	"fmt"
	"strings"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/fabric"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
)

// Images used when a stack names none. Each is pinned by a tag that exists upstream; `:latest`
// and tagless images are refused by validation, so a second `pulumi up` never pulls something new.
const (
	DefaultDaskImage        = dask.DefaultImage                  // the carriers' (components/dask); the scheduler runs the same Dask
	DefaultJupyterImage     = entrypoint.DefaultJupyterImage     // the entrypoint's (components/entrypoint)
	DefaultTensorBoardImage = entrypoint.DefaultTensorBoardImage // the entrypoint's; the TF cluster's own TensorBoard's too
	// The device plugin's newest release found (v0.19.0, 2026-04; v0.17.0 before). Not run
	// here (no GPU): Kolotoc sets what upstream's static DaemonSet sets (FAIL_ON_INIT_ERROR, the
	// kubelet's device-plugins directory), which v0.19.0's release notes do not change.
	DefaultDevicePluginImage = "nvcr.io/nvidia/k8s-device-plugin:v0.19.0"
	DefaultNFSServerImage    = storage.DefaultServerImage // the in-cluster NFS server's (components/storage)
)

// Defaults that fill zero values. Each says its unit and why.
const (
	// defaultPoolCPUs, defaultPoolMemory: a pool that says nothing is an 8-core, 32 GiB node.
	defaultPoolCPUs   = 8
	defaultPoolMemory = "32Gi"
	// localStorageRoot: storage.type local keeps a stack's shared directory under
	// <root>/<namespace>/shared on the node, one directory per stack.
	localStorageRoot = "/var/lib/kolotoc"
	// defaultEFARegion: the EKS registry region of the EFA device plugin's image on a simulated
	// stack that names no region (its image is never pulled there: kwok plays the nodes).
	defaultEFARegion = "us-east-1"
	// defaultKubeconfig: where `make cluster` writes the local cluster's kubeconfig, relative to
	// the project directory (Pulumi runs the program there).
	defaultKubeconfig = ".kolotoc/kubeconfig"
)

// applyDefaults fills zero values only, so it is idempotent: applying it twice changes nothing.
func (c *Config) applyDefaults() {
	if c.Namespace == "" && c.Stack != "" {
		c.Namespace = "kolotoc-" + strings.ToLower(c.Stack)
	}
	if c.Cluster.Name == "" && c.Stack != "" {
		c.Cluster.Name = "kolotoc-" + strings.ToLower(c.Stack)
	}
	if c.Cluster.Kubeconfig == "" && c.Cloud == CloudSimulated {
		c.Cluster.Kubeconfig = defaultKubeconfig
	}
	c.applyTimeoutDefaults()
	c.applyCloudDefaults()  // machine-type figures first, before the generic pool defaults below
	c.applyFabricDefaults() // after the machine-type figures: a GPU machine type's pool is compact
	c.applyRunDefaults()
	for i := range c.NodePools {
		p := &c.NodePools[i]
		meta.Fill(&p.Nodes, 1)
		meta.Fill(&p.MinNodes, p.Nodes)
		meta.Fill(&p.MaxNodes, p.Nodes)
		meta.Fill(&p.CPUs, defaultPoolCPUs)
		meta.Fill(&p.Memory, defaultPoolMemory)
	}

	s := &c.Storage
	if s.Type == "" && !IsCloud(c.Cloud) {
		// On a cloud the type must be named (validateStorage): the in-cluster server's data
		// does not outlive its pod.
		s.Type = StorageInClusterNFS
	}
	if s.Path == "" {
		s.Path = "/"
		if s.Type == StorageLocal && c.Namespace != "" {
			s.Path = fmt.Sprintf("%s/%s/%s", localStorageRoot, c.Namespace, StorageName)
		}
	}
	s.Default() // the rest is the storage's own (components/storage/config.go)

	// Each workload section fills its own defaults, first those it takes from the node pools.
	pools := c.pools()
	c.Towers.DefaultPools(pools)
	c.Towers.Default() // components/ring/config.go
	c.Carriers.DefaultPools(pools)
	c.Carriers.Default()  // components/dask/config.go
	c.Sentinels.Default() // the sentinels' are all their own

	// What one workload takes from another: the scheduler runs the carriers' Dask on their pool,
	// and the launcher runs beside it.
	e := &c.Entrypoint
	meta.Fill(&e.DaskImage, DefaultDaskImage)
	meta.Fill(&e.Pool, c.Carriers.Pool)
	meta.Fill(&c.Towers.LauncherPool, e.Pool)
	e.Default() // components/entrypoint/config.go

	meta.Fill(&c.DevicePlugin.Image, DefaultDevicePluginImage)
	c.applyGPUAgentDefaults() // who runs the device plugin and the DCGM exporter (gpuagents.go)
	if c.Fabric.EFAPluginImage == "" && c.EFAPools() {
		region := c.Cluster.Region
		meta.Fill(&region, defaultEFARegion)
		c.Fabric.EFAPluginImage = fabric.DefaultPluginImage(region)
	}
	c.applyWorkloadDefaults()
	c.DataIn.Default(e.Pool) // components/datain: beside the entrypoint unless said
	c.applyQueueDefaults()   // queue.go
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
		out = append(out, meta.Pool{Name: p.Name, GPUsPerNode: p.GPUsPerNode, CPUs: p.CPUs})
	}
	return out
}

// firstPool returns the first GPU pool (gpu true) or the first CPU pool (gpu false), by the rule
// every section's defaults follow (meta.Pools.First); nil if none.
func (c *Config) firstPool(gpu bool) *NodePool { return c.Pool(c.pools().First(gpu)) }
