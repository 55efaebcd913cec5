package meta

// Pool is one of the stack's node pools as a config section's defaults see it: a section that
// names no pool takes the first of the kind it needs, and sizes itself by that pool's nodes.
type Pool struct {
	Name        string
	GPUsPerNode int // 0: a CPU pool
	CPUs        int // logical cores per node
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
