package main

import (
	"fmt"
	"sort"
	"strings"
)

// workloadKeys are the config keys behind a workload's pod count and per-pod size, for the
// suggestions. The names are the objects the program registers (ring.Name, …).
type workloadKeys struct {
	count             string // "" when the count is not a simple number to lower (etcd members: 1 or 3)
	gpus, cpu, memory string
}

var keysOf = map[string]workloadKeys{
	"StatefulSet/tower":        {count: "towers.count", gpus: "towers.gpusPerTower", cpu: "towers.cpu (and sentinels.cpu)", memory: "towers.memory (and sentinels.memory)"},
	"StatefulSet/carrier":      {count: "carriers.count", cpu: "carriers.cpu", memory: "carriers.memory"},
	"StatefulSet/elastic":      {count: "elastic.nodes", gpus: "elastic.gpusPerNode", cpu: "elastic.cpu", memory: "elastic.memory"},
	"StatefulSet/tf-worker":    {count: "tfcluster.workers.count", gpus: "tfcluster.workers.gpus", cpu: "tfcluster.workers.cpu", memory: "tfcluster.workers.memory"},
	"StatefulSet/tf-ps":        {count: "tfcluster.ps.count", cpu: "tfcluster.ps.cpu", memory: "tfcluster.ps.memory"},
	"StatefulSet/tf-chief":     {cpu: "tfcluster.chief.cpu", memory: "tfcluster.chief.memory"},
	"StatefulSet/tf-evaluator": {cpu: "tfcluster.evaluator.cpu", memory: "tfcluster.evaluator.memory"},
	"StatefulSet/etcd":         {cpu: "etcd.cpu", memory: "etcd.memory"},
	"Job/launcher":             {cpu: "towers.launcherCpu", memory: "towers.launcherMemory"},
	"Deployment/entrypoint":    {cpu: "entrypoint.schedulerCpu, .jupyterCpu, .tensorboardCpu", memory: "entrypoint.schedulerMemory, .jupyterMemory, .tensorboardMemory"},
}

// lacksRoom: the scheduler's reason is a lack of room (a count or size can fix it), not a
// selector, taint or volume that no count changes.
func lacksRoom(reason string) bool {
	return strings.Contains(reason, "Insufficient ") || strings.Contains(reason, "Too many pods")
}

// Suggest says, for each pool whose pods lack room, the simple change that would place them:
// more nodes (as many as the Pending pods need, packed), or fewer pods of the one workload that
// waits; for a pod larger than any node of its pool, a smaller request or a larger machine.
// Reasons that are not a lack of room get no suggestion: the scheduler's message says what to fix.
func Suggest(r *Report) []string {
	pools := map[string]Pool{}
	for _, p := range r.Pools {
		pools[p.Name] = p
	}
	total := map[string]int{}
	for _, p := range r.Pods {
		total[p.Workload]++
	}
	byPool := map[string][]Pod{}
	var out []string
	noted := map[string]bool{}
	for _, p := range r.pending() {
		pool, known := pools[p.Pool]
		switch {
		case p.Undecided || strings.HasPrefix(p.Workload, "DaemonSet/"):
			continue // a node agent follows the nodes; nothing to size
		case known && pool.FromZero:
			// Karpenter's pool: its nodes follow the pods up to maxNodes, so the count to raise
			// is maxNodes, and only when Karpenter says its limit stopped it.
			if !noted[p.Workload] {
				noted[p.Workload] = true
				out = append(out, fromZeroSuggestion(p, pool, r.pending()))
			}
			continue
		case !lacksRoom(p.Reason) || !known:
			if !noted[p.Workload] {
				noted[p.Workload] = true
				out = append(out, fmt.Sprintf("%s: not a matter of count or size; the scheduler's reason above says what stands in the way", p.Workload))
			}
			continue
		case !p.Requests.within(pool.PerNode):
			if !noted[p.Workload] {
				noted[p.Workload] = true
				out = append(out, tooBig(p, pool))
			}
			continue
		}
		byPool[p.Pool] = append(byPool[p.Pool], p)
	}
	names := make([]string, 0, len(byPool))
	for n := range byPool {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		pool, pods := pools[name], byPool[name]
		add := packNodes(pods, pool.PerNode)
		key := fmt.Sprintf("kolotoc:nodePools[%d].nodes", pool.Index)
		if pool.Index < 0 {
			key = fmt.Sprintf("pool %s's nodes", name)
		}
		s := fmt.Sprintf("pool %s: %d more node(s) of its size place the %d pod(s) waiting: %s: %d → %d", name, add, len(pods), key, pool.Nodes, pool.Nodes+add)
		switch want := pool.Nodes + add; {
		case pool.MaxNodes >= want:
			s += fmt.Sprintf(" (maxNodes %d allows it: an autoscaling pool grows on demand, but fit checks the %d node(s) the stack starts with)", pool.MaxNodes, pool.Nodes)
		case pool.MaxNodes > 0:
			s += fmt.Sprintf(", and maxNodes: %d → %d", pool.MaxNodes, want)
		}
		out = append(out, s)
		if ws := workloadsOf(pods); len(ws) == 1 {
			wl := ws[0]
			if k := keysOf[wl]; k.count != "" && total[wl] > len(pods) {
				out = append(out, fmt.Sprintf("or fewer %s pods: kolotoc:%s: %d → %d", wl, k.count, total[wl], total[wl]-len(pods)))
			}
		}
	}
	return out
}

// karpenterLimit is what Karpenter says of a pod it does not place because its NodePool's
// limits are reached (sigs.k8s.io/karpenter pkg/controllers/provisioning/scheduling/scheduler.go).
const karpenterLimit = "exceed limits for nodepool"

// fromZeroSuggestion: for a workload waiting on a pool at zero, a larger maxNodes when Karpenter's
// limit stopped it (as many nodes more as its waiting pods take, packed), else Karpenter's reason.
func fromZeroSuggestion(p Pod, pool Pool, pending []Pod) string {
	if !strings.Contains(p.Autoscaler, karpenterLimit) || pool.Nodes == 0 {
		return fmt.Sprintf("%s: not a matter of the pool's maxNodes; Karpenter's reason above says what stands in the way", p.Workload)
	}
	var waiting []Pod
	for _, q := range pending {
		if q.Pool == pool.Name && strings.Contains(q.Autoscaler, karpenterLimit) {
			waiting = append(waiting, q)
		}
	}
	add := packNodes(waiting, pool.PerNode)
	key := fmt.Sprintf("kolotoc:nodePools[%d].maxNodes", pool.Index)
	return fmt.Sprintf("pool %s: Karpenter stopped at maxNodes %d; %d more node(s) place the %d pod(s) waiting: %s: %d → %d",
		pool.Name, pool.MaxNodes, add, len(waiting), key, pool.MaxNodes, pool.MaxNodes+add)
}

// tooBig: a pod that no node of its pool could hold, even empty.
func tooBig(p Pod, pool Pool) string {
	k := keysOf[p.Workload]
	var over []string
	if p.Requests.GPUs > pool.PerNode.GPUs {
		over = append(over, fmt.Sprintf("%d GPUs (a node has %d; %s)", p.Requests.GPUs, pool.PerNode.GPUs, orKey(k.gpus)))
	}
	if p.Requests.MilliCPU > pool.PerNode.MilliCPU {
		over = append(over, fmt.Sprintf("%s CPUs (a node has %s; %s)", cpus(p.Requests.MilliCPU), cpus(pool.PerNode.MilliCPU), orKey(k.cpu)))
	}
	if p.Requests.Memory > pool.PerNode.Memory {
		over = append(over, fmt.Sprintf("%s memory (a node has %s; %s)", mem(p.Requests.Memory), mem(pool.PerNode.Memory), orKey(k.memory)))
	}
	machine := "a larger machine type"
	if pool.Index >= 0 {
		machine = fmt.Sprintf("a larger kolotoc:nodePools[%d].machineType", pool.Index)
	}
	return fmt.Sprintf("%s: each pod asks %s, more than any node of pool %s holds: lower the request, or give the pool %s",
		p.Workload, strings.Join(over, ", "), pool.Name, machine)
}

func orKey(key string) string {
	if key == "" {
		return "not a Kolotoc setting"
	}
	return "kolotoc:" + key
}

func workloadsOf(pods []Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		if !seen[p.Workload] {
			seen[p.Workload] = true
			out = append(out, p.Workload)
		}
	}
	sort.Strings(out)
	return out
}

// packNodes: how many empty nodes of capacity perNode hold the pods, packed first-fit in
// decreasing order of GPUs, CPU and memory (an upper bound on what the scheduler needs, and exact
// for pods of one shape). Every pod must fit an empty node.
func packNodes(pods []Pod, perNode Resources) int {
	reqs := make([]Resources, len(pods))
	for i, p := range pods {
		reqs[i] = p.Requests
		reqs[i].Pods = max(reqs[i].Pods, 1)
	}
	sort.SliceStable(reqs, func(a, b int) bool {
		x, y := reqs[a], reqs[b]
		if x.GPUs != y.GPUs {
			return x.GPUs > y.GPUs
		}
		if x.MilliCPU != y.MilliCPU {
			return x.MilliCPU > y.MilliCPU
		}
		return x.Memory > y.Memory
	})
	var free []Resources
	for _, r := range reqs {
		placed := false
		for i := range free {
			if r.within(free[i]) {
				free[i] = free[i].sub(r)
				placed = true
				break
			}
		}
		if !placed {
			free = append(free, perNode.sub(r))
		}
	}
	return len(free)
}
