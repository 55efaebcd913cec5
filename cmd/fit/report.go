package main

import (
	"fmt"
	"io"
	"kolotoc/components/meta"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Resources are the amounts the scheduler weighs that the report counts.
type Resources struct {
	GPUs     int64 // nvidia.com/gpu
	MilliCPU int64 // cpu, in thousandths of a core
	Memory   int64 // bytes
	Pods     int64 // pod slots
}

func (r Resources) add(o Resources) Resources {
	return Resources{r.GPUs + o.GPUs, r.MilliCPU + o.MilliCPU, r.Memory + o.Memory, r.Pods + o.Pods}
}

func (r Resources) sub(o Resources) Resources {
	return Resources{r.GPUs - o.GPUs, r.MilliCPU - o.MilliCPU, r.Memory - o.Memory, r.Pods - o.Pods}
}

// within reports whether r fits in capacity c.
func (r Resources) within(c Resources) bool {
	return r.GPUs <= c.GPUs && r.MilliCPU <= c.MilliCPU && r.Memory <= c.Memory && r.Pods <= c.Pods
}

// Pool is one node pool of the mirrored stack, as the local cluster holds it.
type Pool struct {
	Name        string
	Index       int    // position in kolotoc:nodePools; -1 when the stack file does not declare it
	MachineType string // "" when the stack names none
	Nodes       int    // nodes mirrored (the pool's nodes: what the stack starts with)
	MaxNodes    int    // the pool's maxNodes when the stack sets it, else 0
	Real        bool   // declared real: true (the local real node); mirrored as simulated nodes of its declared size
	FromZero    bool   // a pool at zero (minNodes: 0): Karpenter made its nodes in the run
	PerNode     Resources
	Allocatable Resources // every node of the pool together
	Requested   Resources // by the pods placed on its nodes
	// Zones are the zones its nodes are in (topology.kubernetes.io/zone), sorted; none when the
	// nodes carry no zone (a spread pool, or a stack that names none).
	Zones []string
	// Fabric is the nodes' fabric (kolotoc.dev/fabric: efa), "" for none; FabricPerNode the
	// fabric's devices each node advertises and FabricRequested those the placed pods request.
	Fabric                         string
	FabricPerNode, FabricRequested int64
}

// Pod is one pod of the mirrored stack and what the scheduler decided for it.
type Pod struct {
	Name      string
	Workload  string // its controller, Kind/name: StatefulSet/tower, Deployment/entrypoint
	Pool      string // the pool it selects (kolotoc.dev/pool), "" when it selects none
	Node      string // the node it was placed on; "" when it was not
	Requests  Resources
	Reason    string // the scheduler's message (PodScheduled condition) for a pod it could not place
	Undecided bool   // neither placed nor refused by the scheduler before the wait ended
	// Autoscaler: Karpenter's message for a pod of a pool at zero that it could not place (its
	// FailedScheduling event), "" when it said none; AwaitsAutoscaler: such a pod that Karpenter
	// had neither found a node for nor refused when the wait ended.
	Autoscaler       string
	AwaitsAutoscaler bool
}

// Missing is a workload whose controller did not create every pod it should have in time.
type Missing struct {
	Workload        string
	Created, Wanted int
}

// Overcommit is a node whose pods together ask more than it has: the scheduler placed each in
// room that a pod kwok had completed at once (a Job's) had left, room that pod holds on a cloud.
type Overcommit struct {
	Node              string
	Used, Allocatable Resources
}

// Report is the answer of one fit check.
type Report struct {
	Stack   string   // the stack checked (prod, aws, …)
	Source  string   // its stack file, relative to the project
	Mirror  string   // the throw-away stack and the prefix of its node names
	Notes   []string // what the mirror changed besides the cloud, for the reader
	Refused string   // the program refused the configuration: its errors (then nothing was deployed)
	Pools   []Pool
	Pods    []Pod
	Missing []Missing
	// Overcommitted: nodes that hold more than they have once every pod of the stack runs.
	Overcommitted []Overcommit
	// Queue: the stack's queued workloads (kolotoc:queue) and whether Kueue admitted each.
	Queue []Admission
	// Growth: the program's growth of the autoscaled pools and the queue (growth.go); nil when
	// it was not read.
	Growth *Growth
	Deploy time.Duration // pulumi up of the mirror
	Decide time.Duration // until the scheduler had decided every pod
}

// Admission is a queued workload (a Kueue Workload: the ring's pod group) and its admission.
type Admission struct {
	Workload, Queue, ClusterQueue string
	Admitted                      bool
	Message                       string // Kueue's reason when not admitted
}

// Fits: every pod of the stack was placed, every queued workload admitted, and nothing was
// refused or left undecided.
func (r *Report) Fits() bool {
	if r.Refused != "" || len(r.Missing) > 0 || len(r.Overcommitted) > 0 || len(r.Pods) == 0 || r.Growth.neverPlaced() {
		return false
	}
	for _, a := range r.Queue {
		if !a.Admitted {
			return false
		}
	}
	for _, p := range r.Pods {
		if p.Node == "" {
			return false
		}
	}
	return true
}

// ExitCode is what `make fit` exits with: 0 when it fits, 1 when it does not.
func (r *Report) ExitCode() int {
	if r.Fits() {
		return 0
	}
	return 1
}

// Write prints the report: pools, workloads, the Pending pods with the scheduler's reasons, what
// would make it fit, and the verdict.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "make fit: stack %s (%s), mirrored on the local cluster as %s\n", r.Stack, r.Source, r.Mirror)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  · %s\n", n)
	}
	if r.Refused != "" {
		fmt.Fprintf(w, "\nRefused before anything was deployed:\n%s\n", indent(r.Refused, "  "))
		fmt.Fprintf(w, "\nDOES NOT FIT: the program refuses this configuration (above).\n")
		return
	}

	fmt.Fprintf(w, "\nNode pools (allocatable per pool; used = requested by the pods placed there)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  pool\tnodes\tmachine type\tGPUs used/alloc\tCPUs used/alloc\tmemory used/alloc\tpods\theadroom")
	for _, p := range r.Pools {
		machine := p.MachineType
		if machine == "" {
			machine = "-"
		}
		if p.Real {
			machine += " (real node's size)"
		}
		nodes := strconv.Itoa(p.Nodes)
		if p.MaxNodes > p.Nodes {
			nodes += fmt.Sprintf(" (max %d)", p.MaxNodes)
		}
		if p.FromZero {
			nodes = fmt.Sprintf("%d (0..%d)", p.Nodes, p.MaxNodes)
		}
		gpus := "-"
		if p.Allocatable.GPUs > 0 || p.Requested.GPUs > 0 {
			gpus = fmt.Sprintf("%d/%d", p.Requested.GPUs, p.Allocatable.GPUs)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s/%s\t%s/%s\t%d/%d\t%s\n", p.Name, nodes, machine, gpus,
			cpus(p.Requested.MilliCPU), cpus(p.Allocatable.MilliCPU), mem(p.Requested.Memory), mem(p.Allocatable.Memory),
			p.Requested.Pods, p.Allocatable.Pods, headroom(p))
	}
	_ = tw.Flush()
	writePlacement(w, r.Pools)

	fmt.Fprintf(w, "\nWorkloads (where: node names less the %s- prefix)\n", r.Mirror)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  workload\tpods\tplaced\tpending\tper pod\twhere")
	for _, wl := range workloads(r.Pods) {
		var placed, pending int
		var nodes []string
		for _, p := range wl.pods {
			if p.Node != "" {
				placed++
				nodes = append(nodes, strings.TrimPrefix(p.Node, r.Mirror+"-"))
			} else {
				pending++
			}
		}
		where := compressNodes(nodes)
		if where == "" {
			where = "-"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%s\n", wl.name, len(wl.pods), placed, pending, perPod(wl.pods[0].Requests), where)
	}
	_ = tw.Flush()

	if len(r.Overcommitted) > 0 {
		fmt.Fprintf(w, "\nOver-committed once every pod runs (kwok completes a Job's pods at once, which freed their room to others)\n")
		for _, o := range r.Overcommitted {
			fmt.Fprintf(w, "  %s: asked %s of %s allocatable\n", strings.TrimPrefix(o.Node, r.Mirror+"-"), perPod(o.Used), perPod(o.Allocatable))
		}
	}
	if pending := r.pending(); len(pending) > 0 || len(r.Missing) > 0 {
		fmt.Fprintf(w, "\nNot placed (the scheduler's own reason)\n")
		for _, g := range groupByReason(pending) {
			fmt.Fprintf(w, "  %s %s: %s\n", g.workload, strings.Join(g.names, ", "), g.reason)
		}
		for _, m := range r.Missing {
			fmt.Fprintf(w, "  %s: %d of %d pods created before the wait ended\n", m.Workload, m.Created, m.Wanted)
		}
		if s := Suggest(r); len(s) > 0 {
			fmt.Fprintf(w, "\nWhat would make it fit\n")
			for _, line := range s {
				fmt.Fprintf(w, "  - %s\n", line)
			}
		}
	}

	writeGrowth(w, r.Growth, r.Pools)

	nodes := 0
	for _, p := range r.Pools {
		nodes += p.Nodes
	}
	if len(r.Queue) > 0 {
		fmt.Fprintf(w, "\nQueue admission (Kueue; kolotoc:queue)\n")
		for _, a := range r.Queue {
			if a.Admitted {
				fmt.Fprintf(w, "  %s: admitted by ClusterQueue %s (LocalQueue %s), all its pods at once\n", a.Workload, a.ClusterQueue, a.Queue)
			} else {
				fmt.Fprintf(w, "  %s: NOT admitted (LocalQueue %s), every pod held: %s\n", a.Workload, a.Queue, meta.OrUnset(a.Message))
			}
		}
	}
	if r.Fits() {
		fmt.Fprintf(w, "\nFITS: all %d pods placed on %d nodes (deployed in %s, scheduled in %s).\n", len(r.Pods), nodes, round(r.Deploy), round(r.Decide))
		return
	}
	notPlaced := len(r.pending())
	for _, m := range r.Missing {
		notPlaced += m.Wanted - m.Created
	}
	if notPlaced == 0 && len(r.Overcommitted) == 0 && r.Growth.neverPlaced() {
		fmt.Fprintf(w, "\nDOES NOT FIT: what the growth above refuses can never be placed (deployed in %s, scheduled in %s).\n", round(r.Deploy), round(r.Decide))
		return
	}
	if notPlaced == 0 && len(r.Overcommitted) > 0 {
		fmt.Fprintf(w, "\nDOES NOT FIT: %d node(s) over-committed once every pod runs (deployed in %s, scheduled in %s).\n",
			len(r.Overcommitted), round(r.Deploy), round(r.Decide))
		return
	}
	fmt.Fprintf(w, "\nDOES NOT FIT: %d of %d pods not placed (deployed in %s, scheduler waited %s).\n",
		notPlaced, len(r.Pods)+notPlaced-len(r.pending()), round(r.Deploy), round(r.Decide))
}

// writePlacement lists, for the pools whose nodes carry a zone or a fabric, where they are and
// what fabric they have: a compact pool in its one zone, EFA interfaces per node and how many
// the placed pods took (docs/using/gpus.md).
func writePlacement(w io.Writer, pools []Pool) {
	var lines []string
	for _, p := range pools {
		if len(p.Zones) == 0 && p.Fabric == "" {
			continue
		}
		var parts []string
		switch len(p.Zones) {
		case 0:
			parts = append(parts, "no zone")
		case 1:
			parts = append(parts, "one zone ("+p.Zones[0]+")")
		default:
			parts = append(parts, fmt.Sprintf("%d zones (%s)", len(p.Zones), strings.Join(p.Zones, ", ")))
		}
		if p.Fabric == "" {
			parts = append(parts, "no fabric")
		} else {
			parts = append(parts, fmt.Sprintf("fabric %s: %d %s per node, %d/%d requested", p.Fabric, p.FabricPerNode, efaResource,
				p.FabricRequested, p.FabricPerNode*int64(p.Nodes)))
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", p.Name, strings.Join(parts, "; ")))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nPlacement and fabric\n%s\n", strings.Join(lines, "\n"))
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// pending: the pods not placed, in name order.
func (r *Report) pending() []Pod {
	var out []Pod
	for _, p := range r.Pods {
		if p.Node == "" {
			out = append(out, p)
		}
	}
	return out
}

type workload struct {
	name string
	pods []Pod
}

// workloads groups pods by controller, in name order.
func workloads(pods []Pod) []workload {
	by := map[string][]Pod{}
	for _, p := range pods {
		by[p.Workload] = append(by[p.Workload], p)
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]workload, len(names))
	for i, n := range names {
		ps := by[n]
		sort.Slice(ps, func(a, b int) bool { return ps[a].Name < ps[b].Name })
		out[i] = workload{n, ps}
	}
	return out
}

type reasonGroup struct {
	workload, reason string
	names            []string
}

// groupByReason: one line per workload and reason, listing its pods.
func groupByReason(pods []Pod) []reasonGroup {
	var out []reasonGroup
	idx := map[[2]string]int{}
	for _, p := range pods {
		reason := p.Reason
		switch {
		case p.AwaitsAutoscaler:
			reason = "Karpenter had neither made a node for it nor said why not when the wait ended"
		case p.Undecided:
			reason = "not decided by the scheduler before the wait ended"
		case p.Autoscaler != "":
			reason = "Karpenter: " + p.Autoscaler
		case reason == "":
			reason = "(no reason given)"
		}
		k := [2]string{p.Workload, reason}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, reasonGroup{workload: p.Workload, reason: reason})
		}
		out[i].names = append(out[i].names, p.Name)
	}
	return out
}

// compressNodes lists node names (pool-index) with ranges for consecutive indexes placed the same
// number of times: gpu-{0..7}, cpu-0 ×2, cpu-1.
func compressNodes(nodes []string) string {
	type key struct {
		pool string
		i    int
	}
	count := map[key]int{}
	var other []string
	for _, n := range nodes {
		j := strings.LastIndex(n, "-")
		i, err := strconv.Atoi(n[j+1:])
		if j < 0 || err != nil {
			other = append(other, n)
			continue
		}
		count[key{n[:j], i}]++
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].pool != keys[b].pool {
			return keys[a].pool < keys[b].pool
		}
		return keys[a].i < keys[b].i
	})
	var parts []string
	for s := 0; s < len(keys); {
		e := s
		for e+1 < len(keys) && keys[e+1].pool == keys[s].pool && keys[e+1].i == keys[e].i+1 && count[keys[e+1]] == count[keys[s]] {
			e++
		}
		part := fmt.Sprintf("%s-%d", keys[s].pool, keys[s].i)
		if e > s {
			part = fmt.Sprintf("%s-{%d..%d}", keys[s].pool, keys[s].i, keys[e].i)
		}
		if c := count[keys[s]]; c > 1 {
			part += fmt.Sprintf(" ×%d", c)
		}
		parts = append(parts, part)
		s = e + 1
	}
	sort.Strings(other)
	return strings.Join(append(parts, other...), ", ")
}

// headroom: what the pool has left, by the figures the scheduler uses.
func headroom(p Pool) string {
	free := p.Allocatable.sub(p.Requested)
	var parts []string
	if p.Allocatable.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPU", free.GPUs))
	}
	parts = append(parts, cpus(free.MilliCPU)+" CPU", mem(free.Memory))
	return strings.Join(parts, ", ")
}

func perPod(r Resources) string {
	s := ""
	if r.GPUs > 0 {
		s = fmt.Sprintf("%d GPU, ", r.GPUs)
	}
	return s + cpus(r.MilliCPU) + " CPU, " + mem(r.Memory)
}

// cpus prints millicores as cores: 4, 0.5, 33.25.
func cpus(m int64) string {
	return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64)
}

// mem prints a memory amount in the largest binary unit that keeps it readable: 512Mi, 16Gi,
// 5.3Ti (one decimal at most).
func mem(b int64) string {
	neg := ""
	if b < 0 {
		neg, b = "-", -b
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b >= u.size {
			return neg + strconv.FormatFloat(math.Round(float64(b)/float64(u.size)*10)/10, 'f', -1, 64) + u.name
		}
	}
	return neg + strconv.FormatInt(b, 10)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
