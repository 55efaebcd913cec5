package stacks

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"kolotoc/components/datain"
	"kolotoc/components/etcd"
	"kolotoc/components/tfcluster"
)

// validateWorkloads checks the optional workloads that are enabled, and that all GPU pods of a
// pool fit its nodes together.
func (c *Config) validateWorkloads(v *validator) {
	c.validateEtcd(v)
	c.validateElastic(v)
	c.validateTFCluster(v)
	c.validateMonitoring(v)
	c.validateGPUBudget(v)
	c.validateDataIn(v)
}

// validateDataIn checks the data-in Job: its own settings, its image's pin, its command's
// arguments, its pool (a CPU pool it fits on), its run id and env.
func (c *Config) validateDataIn(v *validator) {
	d := c.DataIn
	if !d.Enabled {
		return
	}
	d.Validate(v) // components/datain
	if d.Image != "" {
		v.image(datain.Key+".image", d.Image)
	}
	v.args(datain.Key+".command", d.Command)
	if pool := v.pool(c, datain.Key+".pool", d.Pool, false); pool != nil {
		if pool.GPUsPerNode > 0 {
			v.add(datain.Key+".pool", d.Pool, fmt.Sprintf("is a GPU pool (tainted %s); the data-in Job needs a CPU pool", gpuTaint))
		}
		v.fits(datain.Key, pool, d.CPU, d.Memory)
	}
	v.runID(datain.Key+".run", d.Run)
	v.env(datain.Key+".env", d.Env, OwnSecrets())
}

func (c *Config) validateEtcd(v *validator) {
	e := c.Etcd
	if !e.Enabled {
		return
	}
	e.Validate(v) // the store's own settings (components/etcd/config.go)
	if v.image("etcd.image", e.Image); e.Image != "" && !strings.Contains(e.Image, "@sha256:") && !isLocalImage(e.Image) {
		if tag := imageTag(e.Image); tag != "" && tag != "latest" && !etcd.Is35(tag) {
			v.add("etcd.image", e.Image, "must be etcd 3.5.x (e.g. "+DefaultEtcdImage+"): etcd runs with --enable-v2=true, "+
				"which torch's etcd rendezvous needs and etcd 3.6 removed")
		}
	}
	v.cpuPool(c, "etcd.pool", e.Pool, "etcd", "etcd", e.CPU, e.Memory)
	v.quantity("etcd.storageSize", e.StorageSize)
	if e.Members > 0 {
		v.hostname("etcd.members", strconv.Itoa(e.Members), fmt.Sprintf("%s-%d", EtcdName, e.Members-1), EtcdName+"-peer", c.Namespace)
	}
}

func (c *Config) validateElastic(v *validator) {
	el := c.Elastic
	if !el.Enabled {
		return
	}
	el.Validate(v) // the workers' own settings (components/elastic/config.go)
	if (el.RdzvBackend == RdzvEtcd || el.RdzvBackend == RdzvEtcdV2) && !c.Etcd.Enabled {
		v.add("elastic.rdzvBackend", el.RdzvBackend, "needs the etcd component: set kolotoc:etcd.enabled true, or use rdzvBackend c10d")
	}
	v.image("elastic.image", el.Image)
	v.args("elastic.command", el.Command)
	if pool := v.pool(c, "elastic.pool", el.Pool, true); pool != nil {
		// On a CPU pool with gpusPerNode 0 the workers are CPU workers (one gloo process each):
		// there is no GPU to check.
		if pool.GPUsPerNode > 0 || el.GPUsPerNode != 0 {
			v.gpuPods(pool, "elastic", "elastic.pool", el.Pool, "elastic.gpusPerNode", el.GPUsPerNode, "elastic.nodes", el.Nodes, "workers")
		}
		v.fits("elastic", pool, el.CPU, el.Memory)
	}
	if n := max(el.Nodes, el.MaxNodes); n > 0 {
		v.hostname("elastic.maxNodes", strconv.Itoa(el.MaxNodes), fmt.Sprintf("%s-%d", ElasticName, n-1), ElasticName, c.Namespace)
	}
}

func (c *Config) validateTFCluster(v *validator) {
	tf := c.TFCluster
	if !tf.Enabled {
		return
	}
	tf.Validate(v) // the cluster's own settings (components/tfcluster/config.go)
	v.args("tfcluster.command", tf.Command)
	v.image("tfcluster.image", tf.Image)
	if c.tfOwnTensorBoard() {
		v.image("tfcluster.tensorboardImage", tf.TensorBoardImage)
	}
	for _, r := range c.TFCluster.Roles() {
		role, name := *r.Role, tfcluster.TaskName(r.Type)
		if role.Count > 0 && role.Image != tf.Image {
			v.image(r.Key+".image", role.Image)
		}
		if role.Count < 1 || role.GPUs < 0 {
			continue // none run, or their negative gpus is reported with the cluster's own settings
		}
		if pool := v.pool(c, r.Key+".pool", role.Pool, role.GPUs > 0); pool != nil {
			if role.GPUs == 0 && pool.GPUsPerNode > 0 {
				v.add(r.Key+".pool", role.Pool, fmt.Sprintf("is a GPU pool (tainted %s); a task with gpus 0 does not tolerate it: name a CPU pool or give %s.gpus", gpuTaint, r.Key))
			} else if role.GPUs > 0 {
				v.gpuPods(pool, r.Key, r.Key+".pool", role.Pool, r.Key+".gpus", role.GPUs, r.Key+".count", role.Count, "tasks")
			}
			v.fits(r.Key, pool, role.CPU, role.Memory)
		}
		v.hostname(r.Key+".count", strconv.Itoa(role.Count), fmt.Sprintf("%s-%d", name, role.Count-1), name, c.Namespace)
	}
}

func (c *Config) validateMonitoring(v *validator) {
	m := c.Monitoring
	if !m.Enabled {
		return
	}
	if pool := v.pool(c, "monitoring.pool", m.Pool, false); pool != nil && pool.GPUsPerNode > 0 {
		v.add("monitoring.pool", m.Pool, fmt.Sprintf("is a GPU pool (tainted %s); Prometheus and Grafana need a CPU pool", gpuTaint))
	}
	v.image("monitoring.prometheusImage", m.PrometheusImage)
	if m.DCGMOn() {
		v.image("monitoring.dcgmImage", m.DCGMImage)
	}
	m.Validate(v) // the monitoring's own settings (components/monitoring/config.go)
	v.quantity("monitoring.storageSize", m.StorageSize)
	if !m.GrafanaOn() {
		return // nor an image, nor a password
	}
	v.image("monitoring.grafanaImage", m.GrafanaImage)
	switch {
	case !c.GrafanaPassword.IsSet():
		v.add("grafanaPassword", "(unset)", "required when monitoring is enabled with Grafana (its admin password; there is no default); "+
			"run `pulumi config set --secret kolotoc:grafanaPassword <password>`")
	case len(c.GrafanaPassword.Reveal()) < minPasswordLength:
		v.add("grafanaPassword", "[secret]", fmt.Sprintf("too short; at least %d characters", minPasswordLength))
	}
}

// gpuDemand is one workload's GPU pods on a pool.
type gpuDemand struct {
	who        string // config key of the workload
	pods, gpus int    // pods and GPUs per pod
}

// validateGPUBudget checks that the GPU pods of all workloads on a pool fit its nodes together,
// whole pods to a node (first-fit decreasing, exact for the power-of-two sizes GPUs come in).
// Each workload alone is checked where it is validated; this catches two that fit only apart.
func (c *Config) validateGPUBudget(v *validator) {
	demands := map[string][]gpuDemand{}
	add := func(pool, who string, pods, gpus int) {
		if pods > 0 && gpus > 0 {
			demands[pool] = append(demands[pool], gpuDemand{who, pods, gpus})
		}
	}
	if t := c.Towers; t.Enabled {
		add(t.Pool, "towers", t.Count, t.GPUsPerTower)
	}
	if el := c.Elastic; el.Enabled {
		add(el.Pool, "elastic", el.Nodes, el.GPUsPerNode)
	}
	if tf := c.TFCluster; tf.Enabled {
		for _, r := range c.TFCluster.Roles() {
			add(r.Role.Pool, strings.TrimPrefix(r.Key, "tfcluster."), r.Role.Count, r.Role.GPUs)
		}
	}
	for i, p := range c.NodePools {
		d := demands[p.Name]
		if len(d) < 2 || p.GPUsPerNode < 1 {
			continue // one workload is checked on its own; a CPU pool is refused elsewhere
		}
		if packGPUs(d, p.MaxNodes, p.GPUsPerNode) {
			continue
		}
		parts, total := make([]string, len(d)), 0
		for j, x := range d {
			parts[j] = fmt.Sprintf("%s %d×%d", x.who, x.pods, x.gpus)
			total += x.pods * x.gpus
		}
		v.add(fmt.Sprintf("nodePools[%d].maxNodes", i), strconv.Itoa(p.MaxNodes),
			fmt.Sprintf("the GPU pods on pool %q (%s: %d GPUs) do not fit %d nodes × %d GPUs; add nodes or shrink a workload",
				p.Name, strings.Join(parts, ", "), total, p.MaxNodes, p.GPUsPerNode))
	}
}

// packGPUs places every pod on one of nodes nodes of capacity GPUs each, largest first.
func packGPUs(demands []gpuDemand, nodes, capacity int) bool {
	var pods []int
	for _, d := range demands {
		for i := 0; i < d.pods; i++ {
			pods = append(pods, d.gpus)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(pods)))
	free := make([]int, nodes)
	for i := range free {
		free[i] = capacity
	}
	for _, g := range pods {
		placed := false
		for i := range free {
			if free[i] >= g {
				free[i] -= g
				placed = true
				break
			}
		}
		if !placed {
			return false
		}
	}
	return true
}

// gpuTaint is the GPU pools' taint as users see it in messages.
const gpuTaint = "nvidia.com/gpu=present:NoSchedule"

// gpuPods checks a GPU workload against its pool: GPUs per pod within a node, and the pods
// within the pool (whole pods per node).
func (v *validator) gpuPods(pool *NodePool, what, poolKey, poolName, gpusKey string, gpus int, countKey string, count int, noun string) {
	switch {
	case pool.GPUsPerNode == 0:
		v.add(poolKey, poolName, fmt.Sprintf("is a CPU pool (gpusPerNode 0); %s needs a pool with GPUs", what))
	case gpus < 1 || gpus > pool.GPUsPerNode:
		v.add(gpusKey, strconv.Itoa(gpus), fmt.Sprintf("pool %q has %d GPUs per node; allowed: 1..%d", pool.Name, pool.GPUsPerNode, pool.GPUsPerNode))
	default:
		perNode := pool.GPUsPerNode / gpus
		if capacity := perNode * pool.MaxNodes; count > capacity {
			v.add(countKey, strconv.Itoa(count),
				fmt.Sprintf("%d %s × %d GPUs need more GPUs than pool %q has (%d nodes × %d GPUs, %d per node); allowed: 1..%d",
					count, noun, gpus, pool.Name, pool.MaxNodes, pool.GPUsPerNode, perNode, capacity))
		}
	}
}

// cpuPool checks that a CPU workload's pool exists, is a CPU pool and fits one pod.
func (v *validator) cpuPool(c *Config, key, name, what, prefix, cpu, mem string) {
	pool := v.pool(c, key, name, false)
	if pool == nil {
		return
	}
	if pool.GPUsPerNode > 0 {
		v.add(key, name, fmt.Sprintf("is a GPU pool (tainted %s); %s needs a CPU pool", gpuTaint, what))
	}
	v.fits(prefix, pool, cpu, mem)
}

// args refuses empty command arguments.
func (v *validator) args(key string, args []string) {
	for i, a := range args {
		if strings.TrimSpace(a) == "" {
			v.add(fmt.Sprintf("%s[%d]", key, i), strconv.Quote(a), "empty argument")
		}
	}
}

// imageTag returns an image reference's tag, or "" without one.
func imageTag(ref string) string {
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, _ := strings.Cut(last, ":")
	return tag
}

// isLocalImage: an image the local test bed builds (hack/images.sh), tagged by its recipe's
// content rather than a version; the recipe says what it holds (its etcd is Debian's 3.4, which
// serves the v2 API too).
func isLocalImage(image string) bool {
	return strings.HasPrefix(image, LocalImageRegistry+"/")
}
