// Package cluster makes the nodes a stack's workloads run on. For `cloud: simulated` each node pool
// becomes one SimulatedNodePool object in a local cluster (package simapi), whose Nodes the local
// cluster's pool controller (testbed/cluster/simpool) makes and kwok keeps Ready; they carry
// exactly the labels, taints and capacity a cloud pool's nodes would carry, so the same workloads
// schedule on them the same way. As on a cloud, the stack registers the pool, not its nodes.
package cluster

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/kubeaccess"
	"kolotoc/components/cluster/simapi"
	"kolotoc/components/meta"
)

const (
	// podsPerNode is the pod capacity of a simulated node: the kubelet's default maximum.
	podsPerNode = "110"
)

// PoolType is the SimulatedNodePool's Pulumi resource type.
const PoolType = "kubernetes:" + simapi.APIVersion + ":" + simapi.Kind

// Pool is one pool of identical simulated nodes.
type Pool struct {
	Name        string            // pool name; nodes are <cluster>-<pool>-<index>
	Nodes       int               // number of nodes
	MachineType string            // reported as node.kubernetes.io/instance-type when set
	GPUsPerNode int               // nvidia.com/gpu capacity; 0 for a CPU pool
	GPUType     string            // nvidia.com/gpu.product label on GPU nodes
	CPUs        int               // cpu capacity (cores)
	Memory      string            // memory capacity (quantity)
	Labels      map[string]string // extra labels
	Taints      []Taint           // extra taints; GPU pools get the GPU taint as well
	// Zone is the zone a cloud would put the nodes in (topology.kubernetes.io/zone, which the
	// cloud sets on its own nodes); "" for none.
	Zone string
	// Devices are further resources each node advertises, name to quantity, as a device plugin
	// would on the cloud's nodes (vpc.amazonaws.com/efa on EFA instances, rdma/hca) or the
	// kubelet for pre-allocated huge pages (hugepages-2Mi).
	Devices map[string]string
	// Autoscaled: the pool starts at zero nodes and follows its pods, grown and shrunk by the
	// local cluster's Karpenter (karpenter.go), up to MaxNodes nodes of MachineType (a type of
	// the instance-types file Karpenter reads, testbed/cluster/karpenter); Nodes is then unused.
	Autoscaled bool
	MaxNodes   int  // autoscaled: the most nodes at once
	Spot       bool // autoscaled: spot capacity (karpenter.sh/capacity-type: spot)
	// ScaleDownAfter (autoscaled): how long a node stays once its last pod has left, a
	// Kubernetes duration ("30s", "10m").
	ScaleDownAfter string
}

// ZoneLabel is the well-known label of a node's zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// Taint is a node taint (one type on every cloud).
type Taint = kubeaccess.Taint

// SimulatedArgs are the inputs of a simulated cluster.
type SimulatedArgs struct {
	Name   string      // cluster name, prefix of every node name
	Pools  []Pool      // the pools
	Labels meta.Labels // object labels
}

// Simulated is the simulated node pools of a stack.
type Simulated struct {
	pulumi.ResourceState
	NodeNames pulumi.StringArrayOutput // every node's name, in pool order
	// Pools are the SimulatedNodePool resources, what pods must wait for: each is ready once all
	// its nodes are. Depend on them, not on the component: the SDK adds a child to its component
	// from the child's registration goroutine, so a dependency on the component taken just after
	// NewSimulated returns may miss the pools registered last.
	Pools  []pulumi.Resource
	byName map[string]pulumi.Resource
}

// PoolOf is the SimulatedNodePool of the named pool, what a pod placed on it waits for; none for
// a pool that is not simulated (a real pool, a cloud's) or a nil Simulated.
func (c *Simulated) PoolOf(pool string) []pulumi.Resource {
	if c == nil || c.byName[pool] == nil {
		return nil
	}
	return []pulumi.Resource{c.byName[pool]}
}

// NewSimulated registers one SimulatedNodePool per fixed pool, and a Karpenter NodePool with its
// KWOKNodeClass per autoscaled pool.
func NewSimulated(ctx *pulumi.Context, name string, args *SimulatedArgs, opts ...pulumi.ResourceOption) (*Simulated, error) {
	if args == nil {
		return nil, errors.New("cluster: args are required")
	}
	c := &Simulated{byName: map[string]pulumi.Resource{}}
	if err := ctx.RegisterComponentResource("kolotoc:cluster:Simulated", name, c, opts...); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", name, err)
	}
	var names pulumi.StringArray
	for _, p := range args.Pools {
		if p.Autoscaled {
			r, err := registerAutoscaled(ctx, c, name, args, p)
			if err != nil {
				return nil, fmt.Errorf("cluster %q: %w", name, err)
			}
			c.Pools = append(c.Pools, r)
			c.byName[p.Name] = r
			continue
		}
		poolArgs, err := renderPool(args, p)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", name, err)
		}
		r, err := apiextensions.NewCustomResource(ctx, fmt.Sprintf("%s-%s", name, p.Name), poolArgs, pulumi.Parent(c))
		if err != nil {
			return nil, fmt.Errorf("cluster %q: simulated node pool %q: %w", name, fmt.Sprintf("%s-%s", name, p.Name), err)
		}
		c.Pools = append(c.Pools, r)
		c.byName[p.Name] = r
		for i := 0; i < p.Nodes; i++ {
			names = append(names, pulumi.String(NodeName(args.Name, p.Name, i)))
		}
	}
	c.NodeNames = names.ToStringArrayOutput()
	if err := meta.RegisterOutputs(ctx, c, pulumi.Map{"nodeNames": c.NodeNames}); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", name, err)
	}
	return c, nil
}

// PoolName is the SimulatedNodePool's name: the prefix of its nodes' names.
func PoolName(cluster, pool string) string { return cluster + "-" + pool }

// NodeName is the name of the i-th node of a pool.
func NodeName(cluster, pool string, i int) string { return simapi.NodeName(PoolName(cluster, pool), i) }

// NodeLabels are the labels every node of the pool carries, on every cloud.
func NodeLabels(p Pool) map[string]string {
	l := map[string]string{meta.PoolLabel: p.Name}
	for k, v := range p.Labels {
		l[k] = v
	}
	if p.MachineType != "" {
		l[InstanceTypeLabel] = p.MachineType
	}
	if p.GPUsPerNode > 0 {
		l[meta.GPUPresentLabel] = "true"
		l[meta.GPUProductLabel] = p.GPUType
	}
	return l
}

// NodeTaints are the taints every node of the pool carries: the GPU taint first on GPU pools.
func NodeTaints(p Pool) []Taint {
	var t []Taint
	if p.GPUsPerNode > 0 {
		t = append(t, Taint{Key: meta.GPUTaintKey, Value: meta.GPUTaintValue, Effect: meta.GPUTaintEffect})
	}
	return append(t, p.Taints...)
}

// renderPool is the pool's SimulatedNodePool: its size, and what each node carries.
func renderPool(args *SimulatedArgs, p Pool) (*apiextensions.CustomResourceArgs, error) {
	capacity := map[string]string{"cpu": fmt.Sprint(p.CPUs), "memory": p.Memory, "pods": podsPerNode}
	if p.GPUsPerNode > 0 {
		capacity[meta.GPUResource] = fmt.Sprint(p.GPUsPerNode)
	}
	for name, n := range p.Devices {
		capacity[name] = n
	}
	capJSON, err := json.Marshal(capacity) // json.Marshal sorts map keys: stable across runs
	if err != nil {
		return nil, fmt.Errorf("pool %s: capacity: %w", p.Name, err)
	}
	// No version label on the template, as on a pod template: an upgrade of Kolotoc would be a new
	// generation of every pool, every node re-applied.
	labels := args.Labels.PodLabels("node")
	for k, v := range NodeLabels(p) {
		labels[k] = v
	}
	labels[meta.ClusterLabel] = args.Name
	labels["type"] = "kwok"
	if p.Zone != "" {
		labels[ZoneLabel] = p.Zone
	}
	var taints pulumi.Array
	for _, t := range NodeTaints(p) {
		taints = append(taints, pulumi.StringMap{"key": pulumi.String(t.Key), "value": pulumi.String(t.Value), "effect": pulumi.String(t.Effect)})
	}
	template := pulumi.Map{
		"metadata": pulumi.Map{
			"labels": pulumi.ToStringMap(labels),
			"annotations": pulumi.StringMap{
				simapi.KwokNodeAnnotation: pulumi.String("fake"),
				simapi.CapacityAnnotation: pulumi.String(string(capJSON)),
			},
		},
	}
	if len(taints) > 0 {
		template["spec"] = pulumi.Map{"taints": taints}
	}
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(simapi.APIVersion),
		Kind:       pulumi.String(simapi.Kind),
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(PoolName(args.Name, p.Name)),
			Labels: pulumi.ToStringMap(args.Labels.For("node-pool")),
			// The provider waits until all the pool's nodes exist at its current shape and are Ready.
			Annotations: pulumi.StringMap{meta.WaitForAnnotation: pulumi.String("condition=" + simapi.ReadyCondition)},
		},
		OtherFields: kubernetes.UntypedArgs{
			"spec": pulumi.Map{"nodes": pulumi.Int(p.Nodes), "template": template},
		},
	}, nil
}
