package stacks

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Checks the workloads share: what a pool holds (GPU pods, CPU pods), their commands and images.

// LocalImageRegistry names the images the local test bed builds from Debian packages
// (testbed/images/images.sh); they exist only in the real node's containerd.
const LocalImageRegistry = "kolotoc.local"

// validateGPUBudget checks that the GPU pods of all workloads on a pool fit its nodes together,
// whole pods to a node (first-fit decreasing, exact for the power-of-two sizes GPUs come in).
// Each workload alone is checked where it is validated; this catches two that fit only apart.
func (c *Config) validateGPUBudget(v *Validator) {
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
		d := demands[p.Name]
		if len(d) < 2 || p.GPUsPerNode < 1 {
			continue // one workload is checked on its own; a CPU pool is refused elsewhere
		}
		if packGPUs(d, p.MaxNodes, p.GPUsPerNode) {
			continue
		}
		parts, total := make([]string, len(d)), 0
		for j, x := range d {
			parts[j] = fmt.Sprintf("%s %d×%d", x.Who, x.Pods, x.GPUs)
			total += x.Pods * x.GPUs
		}
		v.add(fmt.Sprintf("nodePools[%d].maxNodes", i), strconv.Itoa(p.MaxNodes),
			fmt.Sprintf("the GPU pods on pool %q (%s: %d GPUs) do not fit %d nodes × %d GPUs; add nodes or shrink a workload",
				p.Name, strings.Join(parts, ", "), total, p.MaxNodes, p.GPUsPerNode))
	}
}

// packGPUs places every pod on one of nodes nodes of capacity GPUs each, largest first.
func packGPUs(demands []GPUDemand, nodes, capacity int) bool {
	d := slices.Clone(demands)
	slices.SortStableFunc(d, func(a, b GPUDemand) int { return cmp.Compare(b.GPUs, a.GPUs) })
	_, unplaced := gpuNodes(d, capacity, nodes, false)
	return unplaced == 0
}

// GPUTaint is the GPU pools' taint as users see it in messages.
const GPUTaint = "nvidia.com/gpu=present:NoSchedule"

// GPUPods checks a GPU workload against its pool: GPUs per pod within a node, and the pods
// within the pool (whole pods per node).
func (v *Validator) GPUPods(pool *NodePool, what, poolKey, poolName, gpusKey string, gpus int, countKey string, count int, noun string) {
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

// CPUPool checks that a CPU workload's pool exists, is a CPU pool and fits one pod.
func (v *Validator) CPUPool(c *Config, key, name, what, prefix, cpu, mem string) {
	pool := v.Pool(c, key, name, false)
	if pool == nil {
		return
	}
	if pool.GPUsPerNode > 0 {
		v.add(key, name, fmt.Sprintf("is a GPU pool (tainted %s); %s needs a CPU pool", GPUTaint, what))
	}
	v.Fits(prefix, pool, cpu, mem)
}

// Args refuses empty command arguments.
func (v *Validator) Args(key string, args []string) {
	for i, a := range args {
		if strings.TrimSpace(a) == "" {
			v.add(fmt.Sprintf("%s[%d]", key, i), strconv.Quote(a), "empty argument")
		}
	}
}

// ImageTag returns an image reference's tag, or "" without one.
func ImageTag(ref string) string {
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, _ := strings.Cut(last, ":")
	return tag
}

// IsLocalImage: an image the local test bed builds (testbed/images/images.sh), tagged by its recipe's
// content rather than a version; the recipe says what it holds (its etcd is Debian's 3.4, which
// serves the v2 API too).
func IsLocalImage(image string) bool {
	return strings.HasPrefix(image, LocalImageRegistry+"/")
}
