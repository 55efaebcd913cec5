package stacks

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Growth from zero, as `make fit` reports it (cmd/fit, docs/using/autoscaling.md): for each
// autoscaled pool, how many nodes the stack's GPU pods take at once and whether maxNodes holds
// them; for each queued workload, what it asks its queue for at once against the quota. Computed
// from the configuration alone, by the same figures validation uses (the workloads' GPUDemand,
// QueueQuota, the gangs' needs); a fit run then compares it with the nodes Karpenter made.

// GrowthOutput is the output a fit stack (kolotoc:fit) exports its Growth under, as JSON text.
const GrowthOutput = "fitGrowth"

// Growth is what the stack's workloads ask of its autoscaled pools and of its queue.
type Growth struct {
	Pools []PoolGrowth `json:"pools"`
	Queue []GangGrowth `json:"queue"`
}

// PoolGrowth is one autoscaled pool (minNodes < maxNodes) and the nodes the GPU pods on it take.
type PoolGrowth struct {
	Pool        string `json:"pool"`
	Index       int    `json:"index"` // position in kolotoc:nodePools
	MachineType string `json:"machineType"`
	GPUsPerNode int    `json:"gpusPerNode"`
	Nodes       int    `json:"nodes"` // what the pool starts with
	MinNodes    int    `json:"minNodes"`
	MaxNodes    int    `json:"maxNodes"`
	// Karpenter: on this cloud the pool is a Karpenter NodePool grown from zero (the simulated
	// cloud's pools at zero); otherwise its `nodes` are fixed on the simulated cloud, and the
	// cloud's autoscaler grows it.
	Karpenter bool `json:"karpenter"`
	// GPUPods: the workloads' GPU pods on the pool, largest first.
	GPUPods []GPUDemand `json:"gpuPods"`
	// Packed: the fewest nodes that hold the GPU pods (first-fit decreasing, whole pods to a node,
	// no bound); Needs: the nodes they take when each workload's pods are first spread one to a
	// node, as Karpenter does with a preferred anti-affinity until maxNodes stops it (it then
	// packs the rest); Unplaced: GPU pods no node within maxNodes holds.
	Packed   int `json:"packed"`
	Needs    int `json:"needs"`
	Unplaced int `json:"unplaced"`
}

// GangGrowth is a queued workload's need at once against the queue's quota (queue.go).
type GangGrowth struct {
	What        string            `json:"what"`
	Key         string            `json:"key"`
	Need        map[string]string `json:"need"`
	Quota       map[string]string `json:"quota"` // what the stack knows of it; empty for an existing ClusterQueue without queue.quota
	QuotaSource string            `json:"quotaSource"`
}

// Growth computes the stack's growth: every autoscaled pool, and every queued workload when the
// queue is on.
func (c *Config) Growth() Growth {
	g := Growth{Pools: []PoolGrowth{}, Queue: []GangGrowth{}}
	demands := map[string][]GPUDemand{}
	for _, wl := range c.enabledWorkloads() {
		if wl.GPUs == nil {
			continue
		}
		for _, d := range wl.GPUs(c) {
			if d.Pods > 0 && d.GPUs > 0 {
				demands[d.Pool] = append(demands[d.Pool], d)
			}
		}
	}
	for i, p := range c.NodePools {
		if !p.Autoscaled() {
			continue
		}
		d := demands[p.Name]
		slices.SortStableFunc(d, func(a, b GPUDemand) int { return cmp.Compare(b.GPUs, a.GPUs) })
		pg := PoolGrowth{Pool: p.Name, Index: i, MachineType: p.MachineType, GPUsPerNode: p.GPUsPerNode,
			Nodes: p.Nodes, MinNodes: p.Min(), MaxNodes: p.MaxNodes, Karpenter: c.karpenterPool(p), GPUPods: d}
		if pg.GPUPods == nil {
			pg.GPUPods = []GPUDemand{}
		}
		pg.Packed, _ = gpuNodes(d, p.GPUsPerNode, -1, false)
		pg.Needs, pg.Unplaced = gpuNodes(d, p.GPUsPerNode, p.MaxNodes, true)
		g.Pools = append(g.Pools, pg)
	}
	if c.Queue.On() {
		quota := c.QueueQuota()
		for _, wl := range c.enabledWorkloads() {
			if wl.Gang == nil {
				continue
			}
			if n := wl.Gang(c); n != nil {
				g.Queue = append(g.Queue, GangGrowth{What: n.What, Key: n.Key, Need: n.Need, Quota: quota, QuotaSource: c.quotaSource()})
			}
		}
	}
	return g
}

// gpuNodes places GPU pods (largest first, as given) on nodes of capacity GPUs each, at most
// limit nodes (-1: no limit): a pod goes to the first node with room, else to a new node. With
// spread, a pod of a workload that spreads (GPUDemand.Spread) first avoids nodes holding one of
// its workload's pods and takes a new node while the limit allows, and only then shares: Karpenter
// treats a preferred anti-affinity as required and relaxes it for a pod that cannot be placed
// otherwise (sigs.k8s.io/karpenter pkg/controllers/provisioning/scheduling: Scheduler.trySchedule,
// Preferences.Relax). It returns the nodes used and the pods left unplaced.
func gpuNodes(demands []GPUDemand, capacity, limit int, spread bool) (nodes, unplaced int) {
	type node struct {
		free int
		has  map[int]bool // the demands (workloads) with a pod here
	}
	var ns []*node
	fits := func(g, w int, avoid bool) *node {
		for _, n := range ns {
			if n.free >= g && !(avoid && n.has[w]) {
				return n
			}
		}
		return nil
	}
	for w, d := range demands {
		for range max(d.Pods, 0) {
			if d.GPUs > capacity {
				unplaced++
				continue
			}
			n := fits(d.GPUs, w, spread && d.Spread)
			if n == nil && (limit < 0 || len(ns) < limit) {
				n = &node{free: capacity, has: map[int]bool{}}
				ns = append(ns, n)
			}
			if n == nil {
				n = fits(d.GPUs, w, false)
			}
			if n == nil {
				unplaced++
				continue
			}
			n.free -= d.GPUs
			n.has[w] = true
		}
	}
	return len(ns), unplaced
}

// growthOutputs is the Growth output of a fit stack, JSON text (none for any other stack).
func growthOutputs(c *Config) pulumi.Map {
	if !c.Fit {
		return nil
	}
	b, _ := json.Marshal(c.Growth()) // strings, numbers, booleans, maps of strings: it cannot fail
	return pulumi.Map{GrowthOutput: pulumi.String(string(b))}
}
