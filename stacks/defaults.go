package stacks

import (
	"fmt"
	"strings"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
)

// Images used when a stack names none. Each is pinned by a tag that exists upstream; `:latest`
// and tagless images are refused by validation, so a second `pulumi up` never pulls something new.
const (
	DefaultDaskImage         = dask.DefaultImage                  // the carriers' (components/dask); the scheduler runs the same Dask
	DefaultJupyterImage      = entrypoint.DefaultJupyterImage     // the entrypoint's (components/entrypoint)
	DefaultTensorBoardImage  = entrypoint.DefaultTensorBoardImage // the entrypoint's; the TF cluster's own TensorBoard's too
	DefaultDevicePluginImage = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
	// The in-cluster NFS server. registry.k8s.io/volume-nfs:0.8 is a Docker v1 manifest that
	// containerd 2.1 refuses to pull; this one is a current manifest.
	DefaultNFSServerImage = "itsthenetwork/nfs-server-alpine:12"
)

// Defaults that fill zero values. Each says its unit and why.
const (
	// defaultPoolCPUs, defaultPoolMemory: a pool that says nothing is an 8-core, 32 GiB node.
	defaultPoolCPUs   = 8
	defaultPoolMemory = "32Gi"
	// defaultStorageSize: the shared claim (quantity); checkpoints of a few large models.
	defaultStorageSize = "100Gi"
	// defaultMountPath, defaultScratchMountPath: where every workload sees storage and scratch.
	defaultMountPath        = "/shared"
	defaultScratchMountPath = "/scratch"
	// defaultScratchSizeLimit: emptyDir scratch limit (quantity) so one pod cannot fill a node's disk.
	defaultScratchSizeLimit = "50Gi"
	// localStorageRoot: storage.type local keeps a stack's shared directory under
	// <root>/<namespace>/shared on the node, one directory per stack.
	localStorageRoot = "/var/lib/kolotoc"
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
	c.applyCloudDefaults() // machine-type figures first, before the generic pool defaults below
	c.applyRunDefaults()
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if p.Nodes == 0 {
			p.Nodes = 1
		}
		if p.MinNodes == 0 {
			p.MinNodes = p.Nodes
		}
		if p.MaxNodes == 0 {
			p.MaxNodes = p.Nodes
		}
		if p.CPUs == 0 {
			p.CPUs = defaultPoolCPUs
		}
		if p.Memory == "" {
			p.Memory = defaultPoolMemory
		}
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
	if s.Size == "" {
		s.Size = defaultStorageSize
	}
	if s.MountPath == "" {
		s.MountPath = defaultMountPath
	}
	if s.Image == "" {
		s.Image = DefaultNFSServerImage
	}
	if s.Scratch.Type == "" {
		s.Scratch.Type = ScratchEmptyDir
	}
	if s.Scratch.SizeLimit == "" {
		s.Scratch.SizeLimit = defaultScratchSizeLimit
	}
	if s.Scratch.MountPath == "" {
		s.Scratch.MountPath = defaultScratchMountPath
	}

	t := &c.Towers
	if t.Pool == "" {
		if p := c.firstPool(true); p != nil {
			t.Pool = p.Name
		}
	}
	if t.GPUsPerTower == 0 {
		if p := c.Pool(t.Pool); p != nil {
			t.GPUsPerTower = p.GPUsPerNode
		}
	}
	t.Default() // the rest is the ring's own (components/ring/config.go)

	k := &c.Carriers
	if k.Pool == "" {
		if p := c.firstPool(false); p != nil {
			k.Pool = p.Name
		}
	}
	if k.WorkersPerCarrier == 0 {
		if p := c.Pool(k.Pool); p != nil {
			k.WorkersPerCarrier = p.CPUs
		}
	}
	k.Default()           // the rest is the carriers' own (components/dask/config.go)
	c.Sentinels.Default() // the sentinels' are all their own

	e := &c.Entrypoint
	if e.DaskImage == "" {
		e.DaskImage = DefaultDaskImage
	}
	if e.Pool == "" {
		e.Pool = c.Carriers.Pool
	}
	if c.Towers.LauncherPool == "" {
		c.Towers.LauncherPool = e.Pool
	}
	e.Default() // the rest is the entrypoint's own (components/entrypoint/config.go)

	if c.DevicePlugin.Image == "" {
		c.DevicePlugin.Image = DefaultDevicePluginImage
	}
	if c.DevicePlugin.Enabled == nil {
		// GKE runs its own NVIDIA device plugin on GPU nodes; a second one would fight it over
		// nvidia.com/gpu.
		on := c.firstPool(true) != nil && c.Cloud != CloudGCP
		c.DevicePlugin.Enabled = &on
	}
	c.applyWorkloadDefaults()
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

// firstPool returns the first GPU pool (gpu true) or the first CPU pool (gpu false); nil if none.
// With no CPU pool, carriers and the entrypoint fall back to the first pool of any kind.
func (c *Config) firstPool(gpu bool) *NodePool {
	for i := range c.NodePools {
		if (c.NodePools[i].GPUsPerNode > 0) == gpu {
			return &c.NodePools[i]
		}
	}
	if !gpu && len(c.NodePools) > 0 {
		return &c.NodePools[0]
	}
	return nil
}
