package towers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/queue"
	"kolotoc/components/ring"
	"kolotoc/components/storage"
	"kolotoc/stacks"
	"kolotoc/stacks/workloads/sentinels"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The towers (kolotoc:towers): the MPI/Horovod ranks and their launcher (components/ring), with
// a Dask sentinel beside each tower when sentinels run (stacks/workloads/sentinels).
var entry = &stacks.Workload{
	Key:          ring.Key,
	Enabled:      func(c *stacks.Config) bool { return c.Towers.Enabled },
	Preset:       func(c *stacks.Config) { c.Towers = ring.NewConfig() },
	PoolDefaults: func(c *stacks.Config, pools meta.Pools) { c.Towers.DefaultPools(pools) },
	Defaults: func(c *stacks.Config) {
		meta.Fill(&c.Towers.LauncherPool, c.Entrypoint.Pool) // the launcher runs beside the scheduler
		// The ranks' time to checkpoint at SIGTERM, within their pool's Spot notice.
		meta.Fill(&c.Towers.TerminationGracePeriodSeconds, graceDefault(c, c.Towers.Pool))
		c.Towers.Default() // components/ring/config.go
	},
	OnSuccess: func(c *stacks.Config) *string { return &c.Towers.OnSuccess },
	Check:     validateTowers,
	Pools:     func(c *stacks.Config) []stacks.PoolUse { return []stacks.PoolUse{{Pool: c.Towers.Pool, Who: "towers"}} },
	GPUs: func(c *stacks.Config) []stacks.GPUDemand {
		return []stacks.GPUDemand{{Who: "towers", Pods: c.Towers.Count, GPUs: c.Towers.GPUsPerTower, Pool: c.Towers.Pool, Spread: true}}
	},
	Env: func(c *stacks.Config) []stacks.EnvSetting {
		return []stacks.EnvSetting{{Key: "towers.env", Env: c.Towers.Env}, {Key: "towers.launcherEnv", Env: c.Towers.LauncherEnv}}
	},
	Secrets: []string{ring.SSHSecretName(ring.Name)},
	Gang: func(c *stacks.Config) *stacks.GangNeed {
		if c.Towers.Count < 1 {
			return nil
		}
		return &stacks.GangNeed{Key: "towers.count", Value: fmt.Sprint(c.Towers.Count),
			What: fmt.Sprintf("the ring (%d towers)", c.Towers.Count), Need: c.TowersNeed()}
	},
	Image:   func(c *stacks.Config) string { return c.Towers.Image },
	Dirs:    func(c *stacks.Config) []string { return []string{checkpointsDir} }, // each run's directory is made by its launcher
	Scratch: true,
	Deploy:  deployTowers,
	Allows:  func(*stacks.Config) []isolation.Allow { return ring.Allows() }, // MPI: ssh, then orted and ranks on any port
	Outputs: func(c *stacks.Config, kube stacks.KubeAccess) pulumi.Map {
		return ring.Outputs(ring.Name, ring.LauncherName, c.Namespace, c.Towers.Count, kube.Kubectlf)
	},
}

// deployTowers registers the ring, with a Dask sentinel beside each tower when sentinels run.
func deployTowers(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
	a := Args(c)
	a.Site = w.Site.WithPodDeps(append(append([]pulumi.Resource{}, w.Mount...), w.Queue...)...)
	if sentinel, ok := sentinels.Beside(c, a.Site); ok {
		a.Sidecars = append(a.Sidecars, sentinel)
		a.ShareProcesses = c.Sentinels.WatchProcesses // sentinels.watchProcesses
	}
	a.SSHKeySeed = pulumi.ToSecret(pulumi.String(c.SSHKeySeed.Reveal())).(pulumi.StringOutput)
	a.KeyBinding = ring.Binding{Project: ctx.Project(), Stack: ctx.Stack(), Namespace: c.Namespace}
	_, err := ring.New(ctx, "towers", a, w.Opts...)
	return err
}

// Args is the ring's configuration, less its site's namespace input and PodDeps, the
// sentinels beside the towers and the ssh keys' seed and binding.
func Args(c *stacks.Config) *ring.Args {
	t := c.Towers
	return &ring.Args{
		Config: t, Site: stacks.WorkloadSite(c), Name: ring.Name, LauncherName: ring.LauncherName,
		CPULimit:    stacks.GPUShareCPULimit(t.CPU, c.Pool(t.Pool), t.GPUsPerTower),
		WaitSeconds: int(c.AwaitDuration().Seconds()), // the launcher waits for its towers as long as Pulumi does
		Fabric:      c.TowerFabric(),
		Queue:       towersQueue(c),
		// The contract's checkpoint directory: one per run id, on the shared claim.
		CheckpointDir: strings.TrimRight(c.Storage.MountPath, "/") + "/" + checkpointsDir + "/" + t.RunID(),
	}
}

// checkpointsDir holds the towers' runs' checkpoint directories, relative to storage.mountPath:
// checkpoints/towers/<run id>.
const checkpointsDir = "checkpoints/towers"

// graceDefault is a workload's default grace period on pool: meta.DefaultTerminationGraceSeconds,
// cut to the cloud's Spot notice on a Spot pool.
func graceDefault(c *stacks.Config, pool string) int {
	p := c.Pool(pool)
	return meta.GraceDefault(c.CloudEntry().SpotNotice, p != nil && p.Spot)
}

// validateRestarts refuses what restarts cannot do: resume from a checkpoint that the towers
// cannot all read (storage.type local is one node's directory, shared only when every tower is
// on that node), and a grace period longer than the towers' pool's Spot notice.
func validateRestarts(c *stacks.Config, v *stacks.Validator, pool *stacks.NodePool) {
	t := c.Towers
	if pool == nil {
		return
	}
	meta.CheckGrace(v, "towers.terminationGracePeriodSeconds", t.TerminationGracePeriodSeconds, c.Cloud, c.CloudEntry().SpotNotice, pool.Spot, pool.Name)
	if t.MaxRestarts > 0 && !storage.SharedAcross(c.Storage.Type, poolNodes(pool)) {
		v.Add("towers.maxRestarts", strconv.Itoa(t.MaxRestarts), fmt.Sprintf(
			"a restart resumes from the checkpoint on the shared store, and storage.type local is a directory of each node, which pool %q's %d nodes do not share; "+
				"allowed: 0 (a failure ends the run), or a store every node mounts (storage.type in-cluster-nfs, nfs or the cloud's)", pool.Name, poolNodes(pool)))
	}
}

// poolNodes is the most nodes a pool can have: the real node(s) of the test bed count as one.
func poolNodes(p *stacks.NodePool) int {
	if p.Real {
		return 1
	}
	return max(p.Nodes, p.MaxNodes)
}

func validateTowers(c *stacks.Config, v *stacks.Validator) {
	t := c.Towers
	if !t.Enabled {
		return
	}
	t.Validate(v) // the towers' own settings (components/ring/config.go)
	pool := v.Pool(c, "towers.pool", t.Pool, true)
	if pool != nil {
		switch {
		case pool.GPUsPerNode == 0 && t.GPUsPerTower != 0:
			v.Add("towers.pool", t.Pool, fmt.Sprintf("is a CPU pool (gpusPerNode 0); towers with gpusPerTower %d need a pool with GPUs (or set gpusPerTower 0 for CPU towers)",
				t.GPUsPerTower))
		case pool.GPUsPerNode == 0:
			validateCPUTowers(c, v, pool)
		case t.GPUsPerTower < 1 || t.GPUsPerTower > pool.GPUsPerNode:
			v.Add("towers.gpusPerTower", strconv.Itoa(t.GPUsPerTower),
				fmt.Sprintf("pool %q has %d GPUs per node; allowed: 1..%d", pool.Name, pool.GPUsPerNode, pool.GPUsPerNode))
		default:
			perNode := pool.GPUsPerNode / t.GPUsPerTower
			if capacity := perNode * pool.MaxNodes; t.Count > capacity {
				v.Add("towers.count", strconv.Itoa(t.Count),
					fmt.Sprintf("%d towers × %d GPUs need more GPUs than pool %q has (%d nodes × %d GPUs, %d towers per node); allowed: 1..%d",
						t.Count, t.GPUsPerTower, pool.Name, pool.MaxNodes, pool.GPUsPerNode, perNode, capacity))
			}
		}
		v.Fits("towers", pool, t.CPU, t.Memory)
		validateTowerDevices(c, v, pool)
		validateRestarts(c, v, pool)
	}
	c.ValidateHostNetwork(v, pool) // stacks/hostnet.go
	if lp := validateLauncherPool(c, v); lp != nil {
		v.FitsKeys("towers.launcherCpu", "towers.launcherMemory", lp, t.LauncherCPU, t.LauncherMemory)
	}
	v.Image("towers.image", t.Image)
	if t.LauncherImage != t.Image {
		v.Image("towers.launcherImage", t.LauncherImage)
	}
	if t.Count > 0 {
		v.Hostname("towers.count", strconv.Itoa(t.Count), fmt.Sprintf("%s-%d", ring.Name, t.Count-1), ring.Name, c.Namespace)
	}
}

// validateLauncherPool refuses a launcher on spot capacity or on GPU nodes. The launcher is the
// run's one coordinator: a spot node reclaimed under it ends the run, whatever the towers' nodes
// are. It requests no GPU and does not tolerate the GPU taint.
func validateLauncherPool(c *stacks.Config, v *stacks.Validator) *stacks.NodePool {
	t := c.Towers
	p := v.Pool(c, "towers.launcherPool", t.LauncherPool, false)
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
		v.Add("towers.launcherPool", t.LauncherPool, fmt.Sprintf(
			"pool %q is spot capacity (spot: true)%s: the launcher coordinates the whole run, and a reclaimed node ends it; %s",
			p.Name, src, choice))
	case p.GPUsPerNode > 0:
		v.Add("towers.launcherPool", t.LauncherPool, fmt.Sprintf(
			"pool %q is a GPU pool%s: the launcher requests no GPU and does not tolerate the GPU taint; %s", p.Name, src, choice))
	}
	return p
}

// validateTowerDevices checks towers.resources against what the towers' pool's nodes advertise
// (nodePools[i].devices): an extended resource or huge page size the nodes lack would leave every
// tower Pending, and the towers one node holds by each are counted as by GPUs.
func validateTowerDevices(c *stacks.Config, v *stacks.Validator, pool *stacks.NodePool) {
	t := c.Towers
	req, _ := t.Resources.Quantities()
	poolKey := fmt.Sprintf("nodePools[%d].devices", slices.IndexFunc(c.NodePools, func(p stacks.NodePool) bool { return p.Name == pool.Name }))
	for _, name := range slices.Sorted(maps.Keys(req)) {
		if !meta.IsExtended(name) && !strings.HasPrefix(name, "hugepages-") {
			continue
		}
		have, ok := pool.Devices.Values[name]
		if !ok {
			v.Add("towers.resources.requests."+name, req[name], fmt.Sprintf(
				"pool %q declares no %s, so no node would take a tower; declare what each node advertises in %s.%s", pool.Name, name, poolKey, name))
			continue
		}
		perNode := meta.PerNode(have, req[name])
		if perNode == 0 && req[name] != "0" {
			v.Add("towers.resources.requests."+name, req[name], fmt.Sprintf("more than a node of pool %q has (%s: %s)", pool.Name, name, have))
			continue
		}
		if capacity := perNode * int64(pool.MaxNodes); perNode > 0 && int64(t.Count) > capacity {
			v.Add("towers.count", strconv.Itoa(t.Count), fmt.Sprintf(
				"%d towers × %s %s need more than pool %q has (%d nodes × %s, %d towers per node); allowed: 1..%d",
				t.Count, req[name], name, pool.Name, pool.MaxNodes, have, perNode, capacity))
		}
	}
}

// validateCPUTowers checks CPU towers (gpusPerTower 0) against their pool: as many towers as
// the pool's nodes hold by CPU and memory requests.
func validateCPUTowers(c *stacks.Config, v *stacks.Validator, pool *stacks.NodePool) {
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
		v.Add("towers.count", strconv.Itoa(t.Count), fmt.Sprintf(
			"a node of pool %q (%d cores, %s) holds no CPU tower of (%s CPU, %s); set kolotoc:towers.cpu and "+
				"kolotoc:towers.memory to what one node gives a tower, e.g. cpu: \"%d\", memory: %dGi (a core and a quarter of "+
				"the memory left to the node's daemons), or give the pool a larger machineType",
			pool.Name, pool.CPUs, pool.Memory, t.CPU, t.Memory, fitCPU, max(fitMem, 1)))
		return
	}
	if capacity := perNode * int64(pool.MaxNodes); int64(t.Count) > capacity {
		v.Add("towers.count", strconv.Itoa(t.Count), fmt.Sprintf(
			"%d CPU towers × (%s CPU, %s) need more than pool %q has (%d nodes × %d cores, %s: %d towers per node); allowed: 1..%d",
			t.Count, t.CPU, t.Memory, pool.Name, pool.MaxNodes, pool.CPUs, pool.Memory, perNode, capacity))
	}
}

// towersQueue queues the towers' StatefulSet when the stack has a queue (meta.SetGang), at the
// towers' priority if the queue gives them one.
func towersQueue(c *stacks.Config) *meta.SetGang {
	if !c.Queue.On() {
		return nil
	}
	g := &meta.SetGang{Queue: c.Queue.LocalQueue}
	if _, ok := c.Queue.Priorities["towers"]; ok {
		g.Priority = queue.PriorityClass(c.Namespace, "towers")
	}
	return g
}
