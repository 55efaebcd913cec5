package stacks

import (
	"fmt"
	"strings"

	"kolotoc/components/fabric"
	"kolotoc/components/meta"
	"kolotoc/components/ring"
)

// Placements of a pool (kolotoc:nodePools[i].placement).
const (
	// PlacementCompact: the pool's nodes in one zone and, where the cloud and machine type have
	// one, in the cloud's compact placement.
	PlacementCompact = "compact"
	// PlacementSpread: the pool may span zones (the cluster's, or the pool's own).
	PlacementSpread = "spread"
)

// Fabric settings of a pool (kolotoc:nodePools[i].fabric).
const (
	FabricAuto = "auto" // the machine type's fast network between nodes, where it has one
	FabricOff  = "off"  // plain TCP over the pod network
)

var (
	allowedPlacements = []string{PlacementCompact, PlacementSpread}
	allowedFabrics    = []string{FabricAuto, FabricOff}
)

// PoolFabric is what a pool's nodes get for the traffic between ranks on different nodes, as
// its cloud and machine type allow and its placement and fabric keys say. A simulated pool gets
// what its machine type's cloud would give it, so that a mirrored stack places the same pods.
type PoolFabric struct {
	// Cloud is the cloud whose catalogue names the pool's machine type ("" if none does).
	Cloud string
	// Compact: the pool is placed compactly (one zone).
	Compact bool
	// PlacementGroup: the cloud's compact placement applies (GKE compact placement policy, EC2
	// cluster placement group, Azure proximity placement group).
	PlacementGroup bool
	// Zone is the compact pool's one zone, "" where the cloud picks it (an existing VPC's first
	// subnet on aws, a non-zonal AKS pool) or the pool spreads.
	Zone string
	// EFAs are the EFA interfaces of each node (aws), each advertised as fabric.EFAResource.
	EFAs int
	// RDMA: GPUDirect RDMA over EFA.
	RDMA bool
	// HugePages: the nodes reserve 2 MiB huge pages for EFA (fabric.NodeHugePagesMi), which the
	// pods on them request beside their interfaces; false where no node advertises them.
	HugePages bool
	// GVNIC: GCP's gVNIC on the nodes.
	GVNIC bool
}

// applyFabricDefaults fills placement and fabric: GPU pools compact, CPU pools spread; fabric
// auto. It runs after the machine-type figures, so a GPU machine type's pool counts as GPU.
func (c *Config) applyFabricDefaults() {
	for i := range c.NodePools {
		p := &c.NodePools[i]
		placement := PlacementSpread
		if p.GPUsPerNode > 0 {
			placement = PlacementCompact
		}
		meta.Fill(&p.Placement, placement)
		meta.Fill(&p.Fabric, FabricAuto)
	}
}

// PoolFabric resolves a pool's placement and fabric: compact pools keep to their own zone, and
// the cloud of the machine type's catalogue (its entry's Fabric) says the rest.
func (c *Config) PoolFabric(p NodePool) PoolFabric {
	m, known := c.machineType(p)
	f := PoolFabric{Compact: p.Placement == PlacementCompact}
	if !known || p.Real {
		return f
	}
	f.Cloud = m.Cloud
	if f.Compact && len(p.Zones) > 0 {
		f.Zone = p.Zones[0]
	}
	if cl := cloudNamed(m.Cloud); cl.Fabric != nil {
		cl.Fabric(c, p, m, &f)
	}
	return f
}

// FabricOn reports whether a pool takes its machine type's fast network: a GPU pool whose fabric
// is not off.
func FabricOn(p NodePool) bool { return p.Fabric != FabricOff && p.GPUsPerNode >= 1 }

// FabricEnv is the environment NCCL needs on a pool's fabric, for every rank: the towers' pods,
// their sshd sessions (which mpirun's ranks are) and the launcher. Empty without a fabric.
func (f PoolFabric) FabricEnv() map[string]string {
	if f.EFAs == 0 {
		return nil
	}
	return fabric.EFAEnv(f.RDMA)
}

// PerPod is the share of a node's EFA interfaces a pod holding gpus of the node's gpusPerNode
// GPUs takes: all of them for a pod that owns the node, in proportion otherwise, at least one.
func (f PoolFabric) PerPod(gpus, gpusPerNode int) int {
	if f.EFAs == 0 || gpus < 1 || gpusPerNode < 1 {
		return 0
	}
	return max(f.EFAs*min(gpus, gpusPerNode)/gpusPerNode, 1)
}

// spreadZones is how many zones a spread pool's nodes may land in: the pool's own, else what the
// cloud of its machine type says (its entry's SpreadZones; 0 unknown).
func (c *Config) spreadZones(p NodePool) int {
	if len(p.Zones) > 0 {
		return len(p.Zones)
	}
	if m, ok := c.machineType(p); ok {
		if cl := cloudNamed(m.Cloud); cl.SpreadZones != nil {
			return cl.SpreadZones(c, p)
		}
	}
	return 0
}

// validateFabric checks each pool's placement and fabric, and refuses a ring of towers spread
// over zones unless the stack accepts it (towers.crossZone).
func (c *Config) validateFabric(v *Validator) {
	for i, p := range c.NodePools {
		key := fmt.Sprintf("nodePools[%d]", i)
		v.oneOf(key+".placement", p.Placement, allowedPlacements)
		v.oneOf(key+".fabric", p.Fabric, allowedFabrics)
		if p.Placement == PlacementCompact && len(p.Zones) > 1 {
			v.add(key+".zones", strings.Join(p.Zones, ","), fmt.Sprintf(
				"a compact pool runs in one zone; allowed: one zone, e.g. [%s], or %s.placement: %s to span them", p.Zones[0], key, PlacementSpread))
		}
	}
	if !c.Towers.Enabled {
		return
	}
	p := c.Pool(c.Towers.Pool)
	if p == nil || p.Placement != PlacementSpread {
		return
	}
	zones := c.spreadZones(*p)
	if c.Towers.CrossZone {
		// crossZone accepts TCP's latency between zones; EFA has none to accept: "EFA traffic
		// can't cross Availability Zones or VPCs" and "is not routable" (EC2 User Guide, "Elastic
		// Fabric Adapter", EFA limitations), so NCCL over EFA between zones does not connect.
		if f := c.PoolFabric(*p); f.EFAs > 0 && zones > 1 && c.towerNodes(p) > 1 {
			i := c.poolIndex(p.Name)
			v.add("towers.crossZone", "true", fmt.Sprintf(
				"the towers' ring spans nodes of pool %s, which spreads over %d zones with EFA (%d interfaces per node), and EFA traffic does not cross subnets or zones: "+
					"NCCL's ranks would not reach each other over it; allowed: nodePools[%d].placement: %s, or nodePools[%d].fabric: %s (TCP across zones), or towers.crossZone: false",
				p.Name, zones, f.EFAs, i, PlacementCompact, i, FabricOff))
		}
		return
	}
	if nodes := c.towerNodes(p); zones > 1 && nodes > 1 {
		i := c.poolIndex(p.Name)
		accept := "towers.crossZone: true to accept it"
		if c.PoolFabric(*p).EFAs > 0 { // EFA does not cross zones at all (above)
			accept = fmt.Sprintf("nodePools[%d].fabric: %s with towers.crossZone: true to accept it over TCP", i, FabricOff)
		}
		v.add(fmt.Sprintf("nodePools[%d].placement", i), p.Placement, fmt.Sprintf(
			"the towers' ring spans %d nodes of pool %s, which spreads over %d zones: every allreduce would cross zones (latency, and traffic charged between zones); "+
				"allowed: %s, or %s", nodes, p.Name, zones, PlacementCompact, accept))
	}
}

// towerNodes is how many nodes the towers take at least: all of a node's GPUs per node, or a
// tower per node for CPU towers on a pool whose nodes fit one.
func (c *Config) towerNodes(p *NodePool) int {
	t := c.Towers
	if t.GPUsPerTower > 0 && p.GPUsPerNode > 0 {
		perNode := max(p.GPUsPerNode/t.GPUsPerTower, 1)
		return (t.Count + perNode - 1) / perNode
	}
	return min(t.Count, max(p.Nodes, 1))
}

// poolIndex is a pool's position in kolotoc:nodePools, -1 if none has the name.
func (c *Config) poolIndex(name string) int {
	for i, p := range c.NodePools {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// EFAPools reports whether any pool has EFA interfaces (the EFA device plugin then runs).
func (c *Config) EFAPools() bool {
	for _, p := range c.NodePools {
		if c.PoolFabric(p).EFAs > 0 {
			return true
		}
	}
	return false
}

// TowerFabric is what the towers take of their pool's fabric (PodFabric).
func (c *Config) TowerFabric() ring.Fabric { return c.PodFabric(c.Towers.Pool, c.Towers.GPUsPerTower) }

// PodFabric is what a pod of pool holding gpus of a node's GPUs takes of the pool's fabric: its
// share of each node's EFA interfaces and of their huge pages, and NCCL's environment on them;
// zero without a fabric. The one rule for every workload whose ranks talk NCCL across nodes
// (towers, elastic workers, TF workers).
func (c *Config) PodFabric(pool string, gpus int) fabric.Share {
	p := c.Pool(pool)
	if p == nil {
		return fabric.Share{}
	}
	f := c.PoolFabric(*p)
	n := f.PerPod(gpus, p.GPUsPerNode)
	if n == 0 {
		return fabric.Share{}
	}
	s := fabric.Share{Resource: fabric.EFAResource, PerPod: n, Env: f.FabricEnv()}
	if f.HugePages {
		s.HugePages = fabric.HugePages(gpus, p.GPUsPerNode)
	}
	return s
}
