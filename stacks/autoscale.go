package stacks

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cluster"
	"kolotoc/components/fabric"
	"kolotoc/components/meta"
	"kolotoc/components/queue"
)

// Pools that follow the runs: a pool whose minNodes is below its maxNodes is autoscaled, and a pool
// with minNodes: 0 sits at zero nodes while no pod needs one. On gcp that is the GKE node pool's
// autoscaling, on azure the AKS cluster autoscaler of a user pool, on aws (from zero) Karpenter
// with a NodePool and EC2NodeClass in place of the node group (stacks/clouds/aws karpenter.go),
// on simulated the local cluster's Karpenter (components/cluster/karpenter.go), which grows the
// pool from zero for an admitted ring and gives its nodes back once they are empty.
// docs/using/autoscaling.md says what each does and costs.

// defaultScaleDownAfter: how long an emptied node of an autoscaled pool stays (nodePools[i].
// scaleDownAfter). Ten minutes is the cluster autoscaler's own default
// (--scale-down-unneeded-time, which GKE's balanced profile and AKS's default profile keep): a
// run's next attempt or the next queued ring finds its nodes still there, and an idle 8-GPU node
// costs at most ten minutes past its run.
const defaultScaleDownAfter = "10m"

// karpenterDuration is what Karpenter's NodePool accepts for disruption.consolidateAfter (its
// CRD's pattern, without "Never": a pool that never scales down is minNodes = maxNodes).
var karpenterDuration = regexp.MustCompile(`^([0-9]+(s|m|h))+$`)

// Min is the pool's minNodes once defaults are applied (nodes when unset).
func (p NodePool) Min() int {
	if p.MinNodes == nil {
		return p.Nodes
	}
	return *p.MinNodes
}

// Autoscaled reports whether the pool's size follows its pods (minNodes < maxNodes).
func (p NodePool) Autoscaled() bool { return p.Min() < p.MaxNodes }

// applyPoolSizeDefaults fills nodes, minNodes and maxNodes: a pool at zero (minNodes: 0) starts
// with no node unless nodes says otherwise; any other pool has one node unless nodes says more,
// and is fixed unless maxNodes is larger.
func (p *NodePool) applyPoolSizeDefaults() {
	if p.MinNodes == nil || *p.MinNodes != 0 {
		meta.Fill(&p.Nodes, 1)
		meta.FillPtr(&p.MinNodes, p.Nodes)
		meta.Fill(&p.MaxNodes, p.Nodes)
	}
	// A pool at zero has no default maximum: minNodes: 0 without maxNodes is what stacks wrote
	// when it meant "the same as nodes", refused by validatePoolSize rather than read anew.
	if p.Autoscaled() {
		meta.Fill(&p.ScaleDownAfter, defaultScaleDownAfter)
	}
}

// validatePoolSize checks a pool's bounds, and what the stack's cloud can do with an autoscaled pool.
func (c *Config) validatePoolSize(v *Validator, k string, p NodePool) {
	fromZero := p.Min() == 0
	if !fromZero {
		v.positive(k+".nodes", p.Nodes)
	} else if p.MaxNodes < 1 {
		v.add(k+".maxNodes", strconv.Itoa(p.MaxNodes), "a pool at zero (minNodes: 0) needs the most nodes its autoscaler may add; allowed: 1 or more. "+
			"(Before this release minNodes: 0 meant \"the same as nodes\": to keep a fixed pool, remove minNodes.)")
		return
	}
	if p.Min() < 0 || p.Min() > p.Nodes || p.Nodes > p.MaxNodes {
		v.add(k+".nodes", strconv.Itoa(p.Nodes), fmt.Sprintf("must satisfy minNodes (%d) <= nodes <= maxNodes (%d)", p.Min(), p.MaxNodes))
	}
	if !p.Autoscaled() {
		if p.ScaleDownAfter != "" {
			v.add(k+".scaleDownAfter", p.ScaleDownAfter, "only an autoscaled pool gives nodes back; allowed: unset, or minNodes below maxNodes")
		}
		return
	}
	if !karpenterDuration.MatchString(p.ScaleDownAfter) {
		v.add(k+".scaleDownAfter", p.ScaleDownAfter, "allowed: a duration in whole seconds, minutes or hours, e.g. 30s, 10m, 1h30m")
	}
	switch {
	case p.Real:
		v.add(k+".minNodes", strconv.Itoa(p.Min()), fmt.Sprintf("the real node is there or not; allowed: %d (= maxNodes)", p.MaxNodes))
	case c.CloudEntry().Local && fromZero:
		c.validateSimulatedAutoscaled(v, k, p)
	}
}

// karpenterPool: the simulated cloud grows this pool through Karpenter, from zero. A simulated pool
// that autoscales above zero (a cloud stack's mirror: make fit, the prod-simulated goldens) keeps
// its nodes fixed at nodes, as before pools at zero existed: Karpenter keeps no minimum.
func (c *Config) karpenterPool(p NodePool) bool {
	return c.CloudEntry().Local && !p.Real && p.Autoscaled() && p.Min() == 0
}

// validateSimulatedAutoscaled: Karpenter grows a simulated pool from zero, with nodes of one
// instance type of the file it reads (KarpenterInstanceTypes); it makes no node before a pod
// needs one and knows no device beyond the machine type's.
func (c *Config) validateSimulatedAutoscaled(v *Validator, k string, p NodePool) {
	if p.Nodes != 0 {
		v.add(k+".nodes", strconv.Itoa(p.Nodes), "Karpenter makes a node only for a pod that needs it; allowed: 0 (unset) with minNodes: 0")
	}
	m, ok := karpenterMachine(p.MachineType)
	if !ok {
		v.add(k+".machineType", shown(p.MachineType), "a simulated pool at zero gets its nodes from Karpenter, whose instance types are the catalogue's machine types with their own GPUs; "+
			"allowed: one of them, e.g. a2-highgpu-8g, p4d.24xlarge, Standard_ND96asr_v4, n2-standard-16")
		return
	}
	if m.GPUs != p.GPUsPerNode || m.VCPUs != p.CPUs || m.Memory() != p.Memory {
		v.add(k+".machineType", p.MachineType, fmt.Sprintf("Karpenter's nodes of it have %d GPUs, %d CPUs and %s; the pool says %d, %d and %s; "+
			"allowed: the machine type's own figures (leave gpusPerNode, cpus and memory unset)", m.GPUs, m.VCPUs, m.Memory(), p.GPUsPerNode, p.CPUs, p.Memory))
	}
	if len(p.Devices.Values) > 0 {
		v.add(k+".devices", strings.Join(meta.SortedKeys(p.Devices.Values), ","), "Karpenter's nodes carry only their machine type's resources; allowed: none on a simulated pool at zero")
	}
	zones, zone := cloudNamed(m.Cloud).KarpenterZones, c.PoolFabric(p).Zone
	if zone != "" && !slices.Contains(zones, zone) {
		v.add(k+".zones", zone, fmt.Sprintf("Karpenter offers %s in the simulated cloud's zones of %s only; allowed: %s",
			p.MachineType, m.Cloud, strings.Join(zones, ", ")))
	}
}

// poolBounds is the output poolBounds: per pool, its first size and its bounds, whether it
// follows its pods, and how long an emptied node stays. What an idle stack costs is the sum of
// the pools' minNodes.
func poolBounds(c *Config) pulumi.Map {
	out := pulumi.Map{}
	for _, p := range c.NodePools {
		b := pulumi.Map{
			"nodes": pulumi.Int(p.Nodes), "minNodes": pulumi.Int(p.Min()), "maxNodes": pulumi.Int(p.MaxNodes),
			"autoscaled": pulumi.Bool(p.Autoscaled()),
		}
		if p.Autoscaled() {
			b["scaleDownAfter"] = pulumi.String(p.ScaleDownAfter)
		}
		if c.QueuedPool(p) {
			b["provisioning"] = pulumi.String(queue.ProvisioningQueued)
		}
		out[p.Name] = b
	}
	return out
}

// karpenterMachine is the catalogue's machine type of that name, on any cloud: an instance type
// of Karpenter's. A type whose GPUs are attached (GCP N1) is offered as the plain CPU machine:
// one instance type cannot say how many GPUs a pool attaches.
func karpenterMachine(name string) (MachineType, bool) {
	for _, cl := range registeredClouds() {
		if m, ok := cl.Catalogue[name]; ok && cl.Creates {
			return m, true
		}
	}
	return MachineType{}, false
}

// karpenterInstanceType is one entry of the instance-types file of Karpenter's kwok provider
// (sigs.k8s.io/karpenter kwok/cloudprovider: InstanceTypeOptions).
type karpenterInstanceType struct {
	Name             string              `json:"name"`
	Offerings        []karpenterOffering `json:"offerings"`
	Architecture     string              `json:"architecture"`
	OperatingSystems []string            `json:"operatingSystems"`
	Resources        map[string]string   `json:"resources"`
}

type karpenterOffering struct {
	Price        float64                  `json:"Price"`
	Available    bool                     `json:"Available"`
	Requirements []karpenterRequirementIn `json:"Requirements"`
}

type karpenterRequirementIn struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// KarpenterInstanceTypes is the instance-types file the local cluster's Karpenter reads
// (testbed/cluster/karpenter/instance-types.json, checked against this by a test): every machine
// type of the catalogue (karpenterMachine), sorted by name, with its GPUs, CPUs, memory, pods
// and EFA interfaces, offered on-demand and spot in its cloud's zones (karpenterZones). Prices
// are relative, a GPU weighing as 32 vCPUs: Karpenter only compares them, and a pool names one
// type, so they decide nothing but the order of equal offers.
func KarpenterInstanceTypes() ([]byte, error) {
	var names []string
	for _, cl := range registeredClouds() {
		for name := range cl.Catalogue {
			if cl.Creates {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	var types []karpenterInstanceType
	for _, name := range names {
		m, _ := karpenterMachine(name)
		res := map[string]string{"cpu": strconv.Itoa(m.VCPUs), "memory": m.Memory(), "pods": "110"}
		if m.GPUs > 0 {
			res[meta.GPUResource] = strconv.Itoa(m.GPUs)
		}
		if m.EFAs > 0 {
			res[fabric.EFAResource] = strconv.Itoa(m.EFAs)
		}
		price := float64(m.VCPUs+32*m.GPUs) / 100
		var offers []karpenterOffering
		for _, zone := range cloudNamed(m.Cloud).KarpenterZones {
			for _, capacity := range []string{cluster.CapacityOnDemand, cluster.CapacitySpot} {
				p := price
				if capacity == cluster.CapacitySpot {
					p = price * 0.3
				}
				offers = append(offers, karpenterOffering{Price: p, Available: true, Requirements: []karpenterRequirementIn{
					{Key: cluster.CapacityTypeLabel, Operator: "In", Values: []string{capacity}},
					{Key: cluster.ZoneLabel, Operator: "In", Values: []string{zone}},
				}})
			}
		}
		types = append(types, karpenterInstanceType{Name: name, Offerings: offers, Architecture: "amd64",
			OperatingSystems: []string{"linux"}, Resources: res})
	}
	// One instance type a line: a diff of the file reads as the machine types that changed.
	out := []byte("[\n")
	for i, it := range types {
		line, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		out = append(out, line...)
		if i < len(types)-1 {
			out = append(out, ',')
		}
		out = append(out, '\n')
	}
	return append(out, "]\n"...), nil
}
