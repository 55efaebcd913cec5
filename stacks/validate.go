package stacks

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
	"kolotoc/components/ring"
	"kolotoc/components/storage"
)

// Object names that the components give their pods and Services. Validation uses them to check
// that the longest generated hostname is still a valid DNS label.
// Each is its component's.
const (
	TowerName    = ring.Name
	LauncherName = ring.LauncherName
	CarrierName  = dask.CarrierName
	EntryName    = entrypoint.Name
	StorageName  = "shared" // the RWX claim
)

// minPasswordLength is the shortest Jupyter password accepted (characters): anything shorter is
// guessable by a port-forwarded brute force in minutes.
const minPasswordLength = 12

var (
	allowedClouds  = []string{CloudSimulated, CloudExisting, CloudGCP, CloudAWS, CloudAzure}
	allowedStorage = []string{StorageInClusterNFS, StorageNFS, StorageLocal, StorageFilestore, StorageEFS, StorageAzureFiles}
	allowedEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
)

// Validate checks the defaulted configuration as a whole and returns every problem found.
func (c *Config) Validate() []FieldError {
	v := &validator{}

	if c.Cloud == "" {
		v.add("cloud", "(unset)", "required; allowed: "+strings.Join(allowedClouds, ", "))
	} else {
		v.oneOf("cloud", c.Cloud, allowedClouds)
	}
	v.dnsLabel("namespace", c.Namespace)
	v.dnsLabel("cluster.name", c.Cluster.Name)
	if c.Cloud == CloudExisting && c.Cluster.Kubeconfig == "" {
		v.add("cluster.kubeconfig", "(unset)", "required with cloud existing: the path of the cluster's kubeconfig")
	}
	switch c.Cloud {
	case CloudGCP, CloudAWS, CloudAzure:
		if c.Cluster.Region == "" {
			v.add("cluster.region", "(unset)", "required with cloud "+c.Cloud)
		}
	}

	c.validatePools(v)
	c.validateCloud(v)
	c.validateFabric(v)
	c.validateStorage(v)
	c.validateTowers(v)
	c.validateRunAsUser(v)
	c.validateCarriers(v)
	c.validateEntrypoint(v)
	c.validateWorkloads(v)
	c.validateQueue(v) // queue.go
	c.validateIsolation(v)
	c.validateRuns(v)
	c.validateTimeouts(v)
	c.validateKubeAccess(v)
	c.validateFit(v)
	c.validateRegistries(v)
	v.image("devicePlugin.image", c.DevicePlugin.Image)
	c.validateGPUAgents(v) // gpuagents.go
	if c.Fabric.EFAPluginImage != "" {
		v.image("fabric.efaPluginImage", c.Fabric.EFAPluginImage)
	}

	if c.Entrypoint.Jupyter {
		switch {
		case !c.JupyterPassword.IsSet():
			v.add("jupyterPassword", "(unset)", "required when entrypoint.jupyter is on (there is no default password); "+
				"run `pulumi config set --secret kolotoc:jupyterPassword <password>`")
		case len(c.JupyterPassword.Reveal()) < minPasswordLength:
			v.add("jupyterPassword", "[secret]", fmt.Sprintf("too short; at least %d characters", minPasswordLength))
		}
	}
	if c.Towers.Enabled && !c.SSHKeySeed.IsSet() {
		v.add("sshKeySeed", "(unset)", "required when towers are enabled (the towers' ssh keys derive from it); "+
			"run `pulumi config set --secret kolotoc:sshKeySeed \"$(openssl rand -hex 32)\"`")
	} else if _, err := ring.SeedBytes(c.SSHKeySeed.Reveal()); c.Towers.Enabled && err != nil {
		v.add("sshKeySeed", "[secret]", fmt.Sprintf("too weak: %v; allowed: %d random bytes or more, hex or base64; "+
			"run `pulumi config set --secret kolotoc:sshKeySeed \"$(openssl rand -hex 32)\"`", err, ring.MinSeedBytes))
	}
	return v.errs
}

func (c *Config) validatePools(v *validator) {
	if len(c.NodePools) == 0 {
		v.add("nodePools", "[]", "at least one node pool is required")
	}
	seen := map[string]bool{}
	for i, p := range c.NodePools {
		k := fmt.Sprintf("nodePools[%d]", i)
		if v.dnsLabel(k+".name", p.Name) {
			if seen[p.Name] {
				v.add(k+".name", p.Name, "duplicate pool name; each pool needs its own name")
			}
			seen[p.Name] = true
			// The longest node name the simulated cloud generates: <cluster>-<pool>-<index>.
			if c.Cloud == CloudSimulated && !p.Real {
				longest := fmt.Sprintf("%s-%s-%d", c.Cluster.Name, p.Name, max(p.Nodes, p.MaxNodes)-1)
				if len(longest) > validation.DNS1123LabelMaxLength {
					v.add(k+".name", p.Name, fmt.Sprintf("node name %q would be %d characters; at most %d (shorten cluster.name or the pool name)",
						longest, len(longest), validation.DNS1123LabelMaxLength))
				}
			}
		}
		meta.CheckDevices(v, k+".devices", p.Devices, ring.ManagedResources)
		v.positive(k+".nodes", p.Nodes)
		if p.MinNodes > p.Nodes || p.Nodes > p.MaxNodes {
			v.add(k+".nodes", strconv.Itoa(p.Nodes), fmt.Sprintf("must satisfy minNodes (%d) <= nodes <= maxNodes (%d)", p.MinNodes, p.MaxNodes))
		}
		if p.GPUsPerNode < 0 {
			v.add(k+".gpusPerNode", strconv.Itoa(p.GPUsPerNode), "must be 0 (a CPU pool) or more")
		}
		if p.GPUsPerNode > 0 && p.GPUType == "" {
			v.add(k+".gpuType", "(unset)", "required when gpusPerNode > 0, e.g. nvidia-tesla-a100")
		}
		v.positive(k+".cpus", p.CPUs)
		v.quantity(k+".memory", p.Memory)
		if p.Real {
			c.validateRealPool(v, k, p)
		}
		if p.LocalSSDs < 0 {
			v.add(k+".localSsds", strconv.Itoa(p.LocalSSDs), "must be 0 or more")
		}
		for lk, lv := range p.Labels {
			for _, msg := range validation.IsQualifiedName(lk) {
				v.add(k+".labels", lk, "invalid label key: "+msg)
			}
			for _, msg := range validation.IsValidLabelValue(lv) {
				v.add(fieldKey(k+".labels", lk), lv, "invalid label value: "+msg)
			}
		}
		for j, t := range p.Taints {
			tk := fmt.Sprintf("%s.taints[%d]", k, j)
			for _, msg := range validation.IsQualifiedName(t.Key) {
				v.add(tk+".key", t.Key, "invalid taint key: "+msg)
			}
			v.oneOf(tk+".effect", t.Effect, allowedEffects)
		}
	}
}

// validateRealPool checks a pool that is the local cluster's real node(s): only the simulated
// cloud has them, they carry no GPU, and no Node is registered for them, so Kolotoc cannot give
// them labels or taints.
func (c *Config) validateRealPool(v *validator, k string, p NodePool) {
	if c.Cloud != CloudSimulated && c.Cloud != "" {
		v.add(k+".real", "true", fmt.Sprintf("a real pool is the local cluster's real node (label %s=%s), only with cloud %s; allowed on %s: false",
			meta.RealNodeLabel, meta.RealNodeValue, CloudSimulated, c.Cloud))
	}
	if p.GPUsPerNode != 0 {
		v.add(k+".gpusPerNode", strconv.Itoa(p.GPUsPerNode), "the local real node has no GPU (GPU shapes run on simulated pools); allowed with real: true: 0")
	}
	if len(p.Labels) > 0 {
		v.add(k+".labels", "(set)", "a real pool registers no Node, so its labels cannot be applied (workloads select "+
			meta.RealNodeLabel+"="+meta.RealNodeValue+"); remove them")
	}
	if len(p.Taints) > 0 {
		v.add(k+".taints", "(set)", "a real pool registers no Node, so its taints cannot be applied; remove them")
	}
}

func (c *Config) validateStorage(v *validator) {
	s := c.Storage
	switch {
	case IsCloud(c.Cloud) && s.Type == "":
		v.add("storage.type", "(unset)", fmt.Sprintf("required on %s: the checkpoints need storage that outlives the pods; allowed on %s: %s",
			c.Cloud, c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	case IsCloud(c.Cloud) && s.Type == StorageInClusterNFS:
		v.add("storage.type", s.Type, fmt.Sprintf("keeps its data in the server pod's emptyDir: a node upgrade, an eviction or a "+
			"restart erases every checkpoint; allowed on %s: %s", c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	default:
		v.oneOf("storage.type", s.Type, allowedStorage)
	}
	s.Validate(v) // the storage's own settings (components/storage/config.go)
	if c.InClusterNFS() {
		v.image("storage.image", s.Image)
	}
	v.quantity("storage.size", s.Size)
	v.absPath("storage.path", s.Path)
	v.absPath("storage.mountPath", s.MountPath)
	v.oneOf("storage.scratch.type", s.Scratch.Type, storage.ScratchTypes)
	if s.Scratch.Path != "" {
		v.absPath("storage.scratch.path", s.Scratch.Path)
		v.nodeDir("storage.scratch.path", s.Scratch.Path)
	}
	if s.Type == StorageLocal {
		v.nodeDir("storage.path", s.Path) // hostPath too
	}
	if s.Server != "" {
		v.host("storage.server", s.Server, "the NFS server's DNS name or IP address, without scheme, port or path, e.g. 10.0.0.2 or nfs.example.com")
	}
	v.quantity("storage.scratch.sizeLimit", s.Scratch.SizeLimit)
	v.absPath("storage.scratch.mountPath", s.Scratch.MountPath)
}

// validateLauncherPool refuses a launcher on spot capacity or on GPU nodes. The launcher is the
// run's one coordinator: a spot node reclaimed under it ends the run, whatever the towers' nodes
// are. It requests no GPU and does not tolerate the GPU taint.
func (c *Config) validateLauncherPool(v *validator) *NodePool {
	t := c.Towers
	p := v.pool(c, "towers.launcherPool", t.LauncherPool, false)
	if p == nil {
		return nil
	}
	var allowed []string
	for _, q := range c.NodePools {
		if !q.Spot && q.GPUsPerNode == 0 {
			allowed = append(allowed, q.Name)
		}
	}
	choice := "allowed: a CPU pool without spot: " + strings.Join(allowed, ", ")
	if len(allowed) == 0 {
		choice = "allowed: a CPU pool without spot, and nodePools declares none: add a small on-demand one"
	}
	src := ""
	if t.LauncherPool == c.Entrypoint.Pool {
		src = " (towers.launcherPool defaults to entrypoint.pool)"
	}
	switch {
	case p.Spot:
		v.add("towers.launcherPool", t.LauncherPool, fmt.Sprintf(
			"pool %q is spot capacity (spot: true)%s: the launcher coordinates the whole run, and a reclaimed node ends it; %s",
			p.Name, src, choice))
	case p.GPUsPerNode > 0:
		v.add("towers.launcherPool", t.LauncherPool, fmt.Sprintf(
			"pool %q is a GPU pool%s: the launcher requests no GPU and does not tolerate the GPU taint; %s", p.Name, src, choice))
	}
	return p
}

func (c *Config) validateTowers(v *validator) {
	t := c.Towers
	if !t.Enabled {
		if c.Sentinels.Enabled {
			v.add("sentinels.enabled", "true", "sentinels run beside towers; enable towers or turn sentinels off")
		}
		return
	}
	t.Validate(v) // the towers' own settings (components/ring/config.go)
	pool := v.pool(c, "towers.pool", t.Pool, true)
	if pool != nil {
		switch {
		case pool.GPUsPerNode == 0 && t.GPUsPerTower != 0:
			v.add("towers.pool", t.Pool, fmt.Sprintf("is a CPU pool (gpusPerNode 0); towers with gpusPerTower %d need a pool with GPUs (or set gpusPerTower 0 for CPU towers)",
				t.GPUsPerTower))
		case pool.GPUsPerNode == 0:
			c.validateCPUTowers(v, pool)
		case t.GPUsPerTower < 1 || t.GPUsPerTower > pool.GPUsPerNode:
			v.add("towers.gpusPerTower", strconv.Itoa(t.GPUsPerTower),
				fmt.Sprintf("pool %q has %d GPUs per node; allowed: 1..%d", pool.Name, pool.GPUsPerNode, pool.GPUsPerNode))
		default:
			perNode := pool.GPUsPerNode / t.GPUsPerTower
			if capacity := perNode * pool.MaxNodes; t.Count > capacity {
				v.add("towers.count", strconv.Itoa(t.Count),
					fmt.Sprintf("%d towers × %d GPUs need more GPUs than pool %q has (%d nodes × %d GPUs, %d towers per node); allowed: 1..%d",
						t.Count, t.GPUsPerTower, pool.Name, pool.MaxNodes, pool.GPUsPerNode, perNode, capacity))
			}
		}
		v.fits("towers", pool, t.CPU, t.Memory)
		c.validateTowerDevices(v, pool)
	}
	c.validateHostNetwork(v, pool) // hostnet.go
	if lp := c.validateLauncherPool(v); lp != nil {
		v.fitsKeys("towers.launcherCpu", "towers.launcherMemory", lp, t.LauncherCPU, t.LauncherMemory)
	}
	v.image("towers.image", t.Image)
	if t.LauncherImage != t.Image {
		v.image("towers.launcherImage", t.LauncherImage)
	}
	if t.Count > 0 {
		v.hostname("towers.count", strconv.Itoa(t.Count), fmt.Sprintf("%s-%d", TowerName, t.Count-1), TowerName, c.Namespace)
	}
	if c.Sentinels.Enabled {
		c.Sentinels.Validate(v) // the sentinels' own settings (components/dask/config.go)
		v.quantity("sentinels.memory", c.Sentinels.Memory)
		v.quantity("sentinels.cpu", c.Sentinels.CPU)
	} else if c.Sentinels.WatchProcesses {
		v.add("sentinels.watchProcesses", "true", "shares a tower's processes with its sentinel; needs sentinels.enabled: true")
	}
	if c.Sentinels.WatchGPUs && (!c.Sentinels.Enabled || !c.Monitoring.Enabled || !c.Monitoring.DCGMOn()) {
		v.add("sentinels.watchGPUs", "true", "reads the node's GPU metrics from kolotoc:monitoring's DCGM exporter; "+
			"needs sentinels.enabled: true, monitoring.enabled: true and the exporter (monitoring.dcgmExporter, on by default with GPU pools)")
	}
}

// validateTowerDevices checks towers.resources against what the towers' pool's nodes advertise
// (nodePools[i].devices): an extended resource or huge page size the nodes lack would leave every
// tower Pending, and the towers one node holds by each are counted as by GPUs.
func (c *Config) validateTowerDevices(v *validator, pool *NodePool) {
	t := c.Towers
	req, _ := t.Resources.Quantities()
	poolKey := fmt.Sprintf("nodePools[%d].devices", slices.IndexFunc(c.NodePools, func(p NodePool) bool { return p.Name == pool.Name }))
	for _, name := range slices.Sorted(maps.Keys(req)) {
		if !meta.IsExtended(name) && !strings.HasPrefix(name, "hugepages-") {
			continue
		}
		have, ok := pool.Devices.Values[name]
		if !ok {
			v.add("towers.resources.requests."+name, req[name], fmt.Sprintf(
				"pool %q declares no %s, so no node would take a tower; declare what each node advertises in %s.%s", pool.Name, name, poolKey, name))
			continue
		}
		perNode := meta.PerNode(have, req[name])
		if perNode == 0 && req[name] != "0" {
			v.add("towers.resources.requests."+name, req[name], fmt.Sprintf("more than a node of pool %q has (%s: %s)", pool.Name, name, have))
			continue
		}
		if capacity := perNode * int64(pool.MaxNodes); perNode > 0 && int64(t.Count) > capacity {
			v.add("towers.count", strconv.Itoa(t.Count), fmt.Sprintf(
				"%d towers × %s %s need more than pool %q has (%d nodes × %s, %d towers per node); allowed: 1..%d",
				t.Count, req[name], name, pool.Name, pool.MaxNodes, have, perNode, capacity))
		}
	}
}

// validateCPUTowers checks CPU towers (gpusPerTower 0) against their pool: as many towers as
// the pool's nodes hold by CPU and memory requests.
func (c *Config) validateCPUTowers(v *validator, pool *NodePool) {
	t := c.Towers
	cpu, errC := resource.ParseQuantity(t.CPU)
	mem, errM := resource.ParseQuantity(t.Memory)
	nodeMem, errN := resource.ParseQuantity(pool.Memory)
	if errC != nil || errM != nil || errN != nil || cpu.Sign() <= 0 || mem.Sign() <= 0 {
		return // reported by fits
	}
	perNode := min(int64(pool.CPUs)*1000/cpu.MilliValue(), nodeMem.Value()/mem.Value())
	if perNode == 0 {
		// Not one tower per node (an old cluster.sh layout of n1-standard-4 towers with the
		// default 4 CPU, 16Gi request): say what fits, leaving a core and a quarter of the
		// memory to the node's own daemons.
		fitCPU := max(int64(pool.CPUs)-1, 1)
		fitMem := nodeMem.Value() * 3 / 4 >> 30
		v.add("towers.count", strconv.Itoa(t.Count), fmt.Sprintf(
			"a node of pool %q (%d cores, %s) holds no CPU tower of (%s CPU, %s); set kolotoc:towers.cpu and "+
				"kolotoc:towers.memory to what one node gives a tower, e.g. cpu: \"%d\", memory: %dGi (a core and a quarter of "+
				"the memory left to the node's daemons), or give the pool a larger machineType",
			pool.Name, pool.CPUs, pool.Memory, t.CPU, t.Memory, fitCPU, max(fitMem, 1)))
		return
	}
	if capacity := perNode * int64(pool.MaxNodes); int64(t.Count) > capacity {
		v.add("towers.count", strconv.Itoa(t.Count), fmt.Sprintf(
			"%d CPU towers × (%s CPU, %s) need more than pool %q has (%d nodes × %d cores, %s: %d towers per node); allowed: 1..%d",
			t.Count, t.CPU, t.Memory, pool.Name, pool.MaxNodes, pool.CPUs, pool.Memory, perNode, capacity))
	}
}

func (c *Config) validateCarriers(v *validator) {
	k := c.Carriers
	if !k.Enabled {
		return
	}
	k.Validate(v) // the carriers' own settings (components/dask/config.go)
	if pool := v.pool(c, "carriers.pool", k.Pool, false); pool != nil {
		v.fits("carriers", pool, k.CPU, k.Memory)
	}
	v.image("carriers.image", k.Image)
	if k.Count > 0 {
		v.hostname("carriers.count", strconv.Itoa(k.Count), fmt.Sprintf("%s-%d", CarrierName, k.Count-1), CarrierName, c.Namespace)
	}
}

func (c *Config) validateEntrypoint(v *validator) {
	e := c.Entrypoint
	e.Validate(v) // the entrypoint's own settings (components/entrypoint/config.go)
	for i, r := range e.SourceRanges {
		v.cidr(fmt.Sprintf("entrypoint.sourceRanges[%d]", i), r, "the networks your users come from, e.g. 203.0.113.0/24")
	}
	c.validateTLS(v)
	v.image("entrypoint.daskImage", e.DaskImage)
	if e.Jupyter {
		v.image("entrypoint.jupyterImage", e.JupyterImage)
	}
	if e.TensorBoard {
		v.image("entrypoint.tensorboardImage", e.TensorBoardImage)
	}
	pool := v.pool(c, "entrypoint.pool", e.Pool, false)
	// The pod's containers: the scheduler always, Jupyter and TensorBoard when enabled.
	containers := []struct {
		on             bool
		name           string
		cpu, mem       string
		cpuKey, memKey string
	}{
		{true, "dask-scheduler", e.SchedulerCPU, e.SchedulerMemory, "entrypoint.schedulerCpu", "entrypoint.schedulerMemory"},
		{e.Jupyter, "jupyter", e.JupyterCPU, e.JupyterMemory, "entrypoint.jupyterCpu", "entrypoint.jupyterMemory"},
		{e.TensorBoard, "tensorboard", e.TensorBoardCPU, e.TensorBoardMemory, "entrypoint.tensorboardCpu", "entrypoint.tensorboardMemory"},
	}
	var cpu, mem resource.Quantity
	valid := true
	for _, ct := range containers {
		if !ct.on {
			continue
		}
		q, errC := resource.ParseQuantity(ct.cpu)
		m, errM := resource.ParseQuantity(ct.mem)
		if errC != nil || q.Sign() <= 0 {
			v.add(ct.cpuKey, ct.cpu, "not a positive CPU quantity such as 500m or 2")
			valid = false
		}
		if errM != nil || m.Sign() <= 0 {
			v.add(ct.memKey, ct.mem, "not a positive memory quantity such as 2Gi")
			valid = false
		}
		cpu.Add(q)
		mem.Add(m)
	}
	if pool != nil && valid {
		nodeMem, err := resource.ParseQuantity(pool.Memory)
		if cpu.MilliValue() > int64(pool.CPUs)*1000 || (err == nil && mem.Cmp(nodeMem) > 0) {
			v.add("entrypoint.pool", e.Pool, fmt.Sprintf("the entrypoint's containers request %s CPU and %s together, more than a node of pool %q has (%d cores, %s); "+
				"lower entrypoint.*Cpu / *Memory or pick a larger pool", cpu.String(), mem.String(), pool.Name, pool.CPUs, pool.Memory))
		}
	}
}

type validator struct{ errs []FieldError }

func (v *validator) add(key, value, msg string) {
	v.errs = append(v.errs, FieldError{Key: key, Value: value, Msg: msg})
}

// Add is add for the components' own checks (meta.Problems).
func (v *validator) Add(key, value, msg string) { v.add(key, value, msg) }

func (v *validator) oneOf(key, value string, allowed []string) {
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	if value == "" {
		value = "(unset)"
	}
	v.add(key, value, "allowed: "+strings.Join(allowed, ", "))
}

func (v *validator) positive(key string, n int) {
	if n < 1 {
		v.add(key, strconv.Itoa(n), "must be at least 1")
	}
}

func (v *validator) dnsLabel(key, value string) bool {
	if value == "" {
		v.add(key, "(unset)", "required: a DNS-1123 label (lower-case letters, digits, '-', at most 63 characters)")
		return false
	}
	if msgs := validation.IsDNS1123Label(value); len(msgs) > 0 {
		v.add(key, value, "not a DNS-1123 label: "+strings.Join(msgs, "; "))
		return false
	}
	return true
}

func (v *validator) quantity(key, value string) {
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() <= 0 {
		v.add(key, value, "not a positive Kubernetes quantity such as 16Gi or 500m")
	}
}

// systemDirs are the node's directories a hostPath must neither be, be inside, nor contain:
// the system's programs and configuration, the kernel's file systems, root's home, and the
// kubelet's and container runtimes' state (every pod's volumes and Secrets).
var systemDirs = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr",
	"/var/lib/containerd", "/var/lib/docker", "/var/lib/kubelet", "/var/run"}

// nodeDir refuses a hostPath directory that would hand a node's system to the pods mounting it:
// "/", a system directory, anything under one, or a directory holding one (/var, /var/lib).
func (v *validator) nodeDir(key, dir string) {
	if !path.IsAbs(dir) {
		return // reported by absPath
	}
	dir = path.Clean(dir)
	for _, sys := range append([]string{"/"}, systemDirs...) {
		if dir == sys || strings.HasPrefix(dir, sys+"/") && sys != "/" || strings.HasPrefix(sys, dir+"/") {
			v.add(key, dir, fmt.Sprintf("a directory of the node's own system (%s): every pod mounting it could take the node over; "+
				"allowed: a directory apart from /, %s, e.g. /mnt/disks/ssd0", sys, strings.Join(systemDirs, ", ")))
			return
		}
	}
}

// host checks a server's address: an IP address or a lower-case DNS name, nothing more.
func (v *validator) host(key, value, what string) {
	if net.ParseIP(value) != nil {
		return
	}
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		v.add(key, value, "not a DNS name or IP address; allowed: "+what)
	}
}

func (v *validator) absPath(key, value string) {
	if !path.IsAbs(value) || path.Clean(value) != value {
		v.add(key, value, "must be a clean absolute path such as /shared")
	}
}

// imageDigest is the digest of a pinned image: sha256, the only algorithm registries serve.
var imageDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// image refuses tagless and :latest images: an unpinned image makes two `pulumi up` of the same
// config run different code.
func (v *validator) image(key, ref string) {
	if ref == "" {
		v.add(key, "(unset)", "required: an image pinned by tag or digest")
		return
	}
	if name, digest, ok := strings.Cut(ref, "@"); ok {
		if name == "" || !imageDigest.MatchString(digest) {
			v.add(key, ref, "not a digest-pinned image; allowed: name@sha256: and 64 lower-case hexadecimal digits")
		}
		return
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	if !ok || tag == "" {
		v.add(key, ref, "image is not pinned; add a tag (name:1.2.3) or a digest (name@sha256:…)")
	} else if tag == "latest" {
		v.add(key, ref, "`:latest` is not pinned; use a version tag or a digest")
	}
}

// pool checks that a referenced pool exists and returns it.
func (v *validator) pool(c *Config, key, name string, gpu bool) *NodePool {
	if name == "" {
		kind := "CPU"
		if gpu {
			kind = "GPU"
		}
		v.add(key, "(unset)", "no "+kind+" pool declared in nodePools to default to; name one")
		return nil
	}
	p := c.Pool(name)
	if p == nil {
		names := make([]string, len(c.NodePools))
		for i, np := range c.NodePools {
			names[i] = np.Name
		}
		v.add(key, name, "pool not declared in nodePools; declared: "+strings.Join(names, ", "))
	}
	return p
}

// fits checks that a pod's CPU and memory requests (keys <prefix>.cpu, <prefix>.memory) fit one
// node of the pool.
func (v *validator) fits(prefix string, p *NodePool, cpu, mem string) {
	v.fitsKeys(prefix+".cpu", prefix+".memory", p, cpu, mem)
}

// fitsKeys is fits with the keys of the CPU and memory requests named in full.
func (v *validator) fitsKeys(cpuKey, memKey string, p *NodePool, cpu, mem string) {
	c, errC := resource.ParseQuantity(cpu)
	m, errM := resource.ParseQuantity(mem)
	if errC != nil || c.Sign() <= 0 {
		v.add(cpuKey, cpu, "not a positive CPU quantity such as 4 or 500m")
	}
	if errM != nil || m.Sign() <= 0 {
		v.add(memKey, mem, "not a positive memory quantity such as 16Gi")
	}
	nodeMem, err := resource.ParseQuantity(p.Memory)
	if errC == nil && c.MilliValue() > int64(p.CPUs)*1000 {
		v.add(cpuKey, cpu, fmt.Sprintf("more than a node of pool %q has (%d cores)", p.Name, p.CPUs))
	}
	if errM == nil && err == nil && m.Cmp(nodeMem) > 0 {
		v.add(memKey, mem, fmt.Sprintf("more than a node of pool %q has (%s)", p.Name, p.Memory))
	}
}

// hostname checks the longest pod hostname a StatefulSet generates and its FQDN in the hostfile.
func (v *validator) hostname(key, value, host, service, namespace string) {
	if msgs := validation.IsDNS1123Label(host); len(msgs) > 0 {
		v.add(key, value, fmt.Sprintf("pod hostname %q is not a DNS label: %s", host, strings.Join(msgs, "; ")))
	}
	fqdn := fmt.Sprintf("%s.%s.%s.svc", host, service, namespace)
	if len(fqdn) > validation.DNS1123SubdomainMaxLength {
		v.add(key, value, fmt.Sprintf("hostname %q is longer than %d characters", fqdn, validation.DNS1123SubdomainMaxLength))
	}
}

// validateTLS checks entrypoint.tlsCertificate and kolotoc:entrypointTLSKey: both or neither, a
// PEM certificate and the PEM private key of its public key. Never prints the key.
func (c *Config) validateTLS(v *validator) {
	cert, key := c.Entrypoint.TLSCertificate, c.EntrypointTLSKey
	switch {
	case cert == "" && !key.IsSet():
		return
	case cert == "":
		v.add("entrypoint.tlsCertificate", "(unset)", "required with kolotoc:entrypointTLSKey: the PEM certificate of that key")
		return
	case !key.IsSet():
		v.add("entrypointTLSKey", "(unset)", "required with entrypoint.tlsCertificate: "+
			"`pulumi config set --secret kolotoc:entrypointTLSKey < key.pem`")
		return
	}
	if _, err := tls.X509KeyPair([]byte(cert), []byte(key.Reveal())); err != nil {
		// The error of X509KeyPair names what failed (no certificate, no key, mismatch), never
		// the key's bytes.
		v.add("entrypoint.tlsCertificate", "[PEM]", "with kolotoc:entrypointTLSKey not a certificate and its key: "+
			strings.TrimPrefix(err.Error(), "tls: ")+"; allowed: a PEM certificate (chain) and the PEM private key of its first certificate")
	}
}
