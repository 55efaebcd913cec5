package meta

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Pool is one of the stack's node pools as a config section's defaults see it: a section that
// names no pool takes the first of the kind it needs, and sizes itself by that pool's nodes.
type Pool struct {
	Name        string
	GPUsPerNode int    // 0: a CPU pool
	CPUs        int    // logical cores per node
	Memory      string // memory per node, a quantity ("" when unknown)
}

// FitDefaults are a workload's default CPU and memory requests per pod (quantities), cut to what
// one node of the pool gives a pod when the default would not fit there: all its cores but one
// (at least one), and three quarters of its memory (whole GiB, at least 1Gi), the rest left to
// the node's own daemons and the kubelet's reservations. A default that fits is kept, and so is
// one of a pool whose size is unknown.
func (p Pool) FitDefaults(cpu, memory string) (string, string) {
	if c, err := resource.ParseQuantity(cpu); err == nil && p.CPUs > 0 {
		if fit := max(int64(p.CPUs)-1, 1); c.MilliValue() > fit*1000 {
			cpu = strconv.FormatInt(fit, 10)
		}
	}
	m, errM := resource.ParseQuantity(memory)
	node, errN := resource.ParseQuantity(p.Memory)
	if errM == nil && errN == nil && node.Sign() > 0 {
		if fit := max(node.Value()*3/4>>30, 1); m.Value() > fit<<30 {
			memory = strconv.FormatInt(fit, 10) + "Gi"
		}
	}
	return cpu, memory
}

// Pools are the stack's node pools in the stack file's order: what every section's DefaultPools
// reads, so that each fills its pool-dependent defaults itself.
type Pools []Pool

// First names the first GPU pool (gpu true) or the first CPU pool (gpu false); with no CPU pool,
// the first pool of any kind (carriers and the entrypoint then share the GPU nodes). "" when
// there is none.
func (ps Pools) First(gpu bool) string {
	for _, p := range ps {
		if (p.GPUsPerNode > 0) == gpu {
			return p.Name
		}
	}
	if !gpu && len(ps) > 0 {
		return ps[0].Name
	}
	return ""
}

// Get is the pool of that name; the zero Pool (no GPUs, no CPUs) when there is none, so that a
// default taken from it leaves the field to validation, which names the unknown pool.
func (ps Pools) Get(name string) Pool {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	return Pool{}
}
