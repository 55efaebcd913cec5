package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Growth from zero: what the program computes from the stack's configuration for its autoscaled
// pools and its queue (stacks/growth.go, exported by a fit stack as the output growthOutput), and
// what the report says of it beside what the run's Karpenter did.

// growthOutput is stacks.GrowthOutput (not imported, as ns).
const growthOutput = "fitGrowth"

// Growth is the output's JSON (stacks.Growth).
type Growth struct {
	Pools []PoolGrowth `json:"pools"`
	Queue []GangGrowth `json:"queue"`
}

// PoolGrowth is stacks.PoolGrowth: one autoscaled pool and the nodes its GPU pods take.
type PoolGrowth struct {
	Pool        string      `json:"pool"`
	Index       int         `json:"index"`
	MachineType string      `json:"machineType"`
	GPUsPerNode int         `json:"gpusPerNode"`
	Nodes       int         `json:"nodes"`
	MinNodes    int         `json:"minNodes"`
	MaxNodes    int         `json:"maxNodes"`
	Karpenter   bool        `json:"karpenter"`
	GPUPods     []GPUDemand `json:"gpuPods"`
	Packed      int         `json:"packed"`
	Needs       int         `json:"needs"`
	Unplaced    int         `json:"unplaced"`
}

// GPUDemand is stacks.GPUDemand: one workload's GPU pods.
type GPUDemand struct {
	Who    string `json:"who"`
	Pods   int    `json:"pods"`
	GPUs   int    `json:"gpus"`
	Spread bool   `json:"spread"`
}

// GangGrowth is stacks.GangGrowth: a queued workload's need at once against the queue's quota.
type GangGrowth struct {
	What        string            `json:"what"`
	Key         string            `json:"key"`
	Need        map[string]string `json:"need"`
	Quota       map[string]string `json:"quota"`
	QuotaSource string            `json:"quotaSource"`
}

// parseGrowth reads `pulumi stack output --json fitGrowth`: a JSON string holding the growth's JSON.
func parseGrowth(out []byte) (*Growth, error) {
	var text string
	if err := json.Unmarshal(out, &text); err != nil {
		return nil, fmt.Errorf("output %s: %w", growthOutput, err)
	}
	var g Growth
	if err := json.Unmarshal([]byte(text), &g); err != nil {
		return nil, fmt.Errorf("output %s: %w", growthOutput, err)
	}
	return &g, nil
}

// over lists the resources a queued workload needs more of than the quota grants: it would
// never be admitted, whatever the pools do.
func (q GangGrowth) over() []string {
	var out []string
	for _, r := range slices.Sorted(maps.Keys(q.Need)) {
		have, known := q.Quota[r]
		if !known {
			continue
		}
		n, errN := resource.ParseQuantity(q.Need[r])
		h, errH := resource.ParseQuantity(have)
		if errN == nil && errH == nil && n.Cmp(h) > 0 {
			out = append(out, fmt.Sprintf("%s %s of the quota's %s", q.Need[r], r, have))
		}
	}
	return out
}

// neverPlaced: what the growth says can never be placed: GPU pods no node within a pool's
// maxNodes holds, a queued workload larger than its quota.
func (g *Growth) neverPlaced() bool {
	if g == nil {
		return false
	}
	for _, p := range g.Pools {
		if p.Unplaced > 0 {
			return true
		}
	}
	for _, q := range g.Queue {
		if len(q.over()) > 0 {
			return true
		}
	}
	return false
}

// made is how many nodes the run has of a pool (0 when it has none).
func made(pools []Pool, name string) int {
	for _, p := range pools {
		if p.Name == name {
			return p.Nodes
		}
	}
	return 0
}

// writeGrowth prints the growth section: per autoscaled pool how far it grows for the stack's
// GPU pods, within maxNodes, beside the nodes the run's Karpenter made of a pool at zero; per
// queued workload its need at once against the quota.
func writeGrowth(w io.Writer, g *Growth, pools []Pool) {
	if g == nil || len(g.Pools)+len(g.Queue) == 0 {
		return
	}
	fmt.Fprintf(w, "\nGrowth (autoscaled pools: the nodes the GPU pods take, from the configuration; a pool at zero grown by Karpenter in this run)\n")
	for _, p := range g.Pools {
		fmt.Fprintf(w, "  %s\n", growthLine(p, pools))
	}
	for _, q := range g.Queue {
		quota := "unknown (an existing ClusterQueue; queue.quota says it)"
		if len(q.Quota) > 0 {
			quota = amounts(q.Quota) + " (" + q.QuotaSource + ")"
		}
		line := fmt.Sprintf("queue: %s asks %s at once; the queue's quota: %s", q.What, amounts(q.Need), quota)
		if over := q.over(); len(over) > 0 {
			line += fmt.Sprintf(": REFUSED: it needs %s; it would wait forever (kolotoc:%s)", strings.Join(over, ", "), q.Key)
		}
		fmt.Fprintf(w, "  %s\n", line)
	}
}

// growthLine is one pool's growth: "pool gpu: grows 0 → 2 nodes of a2-highgpu-8g (max 4): …".
func growthLine(p PoolGrowth, pools []Pool) string {
	machine := ""
	if p.MachineType != "" {
		machine = " of " + p.MachineType
	}
	var pods []string
	for _, d := range p.GPUPods {
		pods = append(pods, fmt.Sprintf("%s %d×%d GPUs", d.Who, d.Pods, d.GPUs))
	}
	run := made(pools, p.Pool)
	var s string
	switch {
	case len(p.GPUPods) == 0 && p.Karpenter:
		s = fmt.Sprintf("pool %s: no GPU pod to count; from %d up to %d nodes%s for the pods that need them: Karpenter made %d in this run", p.Pool, p.Nodes, p.MaxNodes, machine, run)
		return s
	case len(p.GPUPods) == 0:
		return fmt.Sprintf("pool %s: no GPU pod to count; autoscaled %d..%d nodes%s, the mirror holds the %d it starts with", p.Pool, p.MinNodes, p.MaxNodes, machine, p.Nodes)
	case p.Needs <= p.Nodes && p.Unplaced == 0:
		s = fmt.Sprintf("pool %s: stays at %d nodes%s (max %d): %s take %d", p.Pool, p.Nodes, machine, p.MaxNodes, strings.Join(pods, ", "), p.Needs)
	default:
		s = fmt.Sprintf("pool %s: grows %d → %d nodes%s (max %d): %s", p.Pool, p.Nodes, p.Needs, machine, p.MaxNodes, strings.Join(pods, ", "))
	}
	if p.Packed < p.Needs {
		s += fmt.Sprintf(", spread one to a node while maxNodes allows (packed they take %d)", p.Packed)
	}
	if p.Unplaced > 0 {
		s += fmt.Sprintf(": REFUSED: %d GPU pod(s) fit no node within maxNodes %d (%d GPUs each); they would wait forever (kolotoc:nodePools[%d].maxNodes)",
			p.Unplaced, p.MaxNodes, p.GPUsPerNode, p.Index)
	}
	switch {
	case !p.Karpenter:
		s += fmt.Sprintf("; the mirror holds the %d node(s) it starts with (only a pool at zero grows here, by Karpenter)", p.Nodes)
	case run == p.Needs:
		s += fmt.Sprintf("; Karpenter made %d in this run", run)
	default:
		s += fmt.Sprintf("; Karpenter made %d in this run, not %d (its own placement: the pods' CPU and memory, the order it took them in)", run, p.Needs)
	}
	return s
}

// amounts prints a need or quota: "16 nvidia.com/gpu, 9 cpu, 41Gi memory", GPUs first.
func amounts(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int {
		ga, gb := a == string(gpuResource), b == string(gpuResource)
		switch {
		case ga && !gb:
			return -1
		case gb && !ga:
			return 1
		}
		return 0
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, m[k]+" "+k)
	}
	return strings.Join(parts, ", ")
}
