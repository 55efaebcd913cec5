// Package cluster makes the nodes a stack's workloads run on. For `cloud: simulated` each node
// pool becomes kwok-managed Node objects in a local cluster, carrying exactly the labels, taints and
// capacity a cloud pool's nodes would carry, so the same workloads schedule on them the same way.
package cluster

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// KwokNodeAnnotation hands a Node to the kwok controller, which then plays its kubelet:
	// keeps it Ready and marks the pods scheduled on it Running.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// CapacityAnnotation carries the node's capacity as a JSON map of resource name to quantity.
	// A Node's status cannot be set through its Pulumi resource (the API treats it as the
	// kubelet's); the local cluster's kwok node stage (hack/cluster.sh) copies this annotation
	// into status.capacity and status.allocatable, as a kubelet would report its hardware.
	CapacityAnnotation = "kolotoc.dev/simulated-capacity"
	// podsPerNode is the pod capacity of a simulated node: the kubelet's default maximum.
	podsPerNode = "110"
)

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
}

// Taint is a node taint.
type Taint struct{ Key, Value, Effect string }

// SimulatedArgs are the inputs of a simulated cluster.
type SimulatedArgs struct {
	Name   string      // cluster name, prefix of every node name
	Pools  []Pool      // the pools
	Labels meta.Labels // object labels
}

// Simulated is the set of kwok Nodes of a stack.
type Simulated struct {
	pulumi.ResourceState
	NodeNames pulumi.StringArrayOutput // every node's name, in pool order
	// Nodes are the Node resources, what pods must wait for. Depend on them, not on the
	// component: the SDK adds a child to its component from the child's registration goroutine,
	// so a dependency on the component taken just after NewSimulated returns may miss the Nodes
	// registered last (seen: a DaemonSet waiting for 9 of 10 Nodes).
	Nodes []pulumi.Resource
}

// NewSimulated registers one Node per node of every pool.
func NewSimulated(ctx *pulumi.Context, name string, args *SimulatedArgs, opts ...pulumi.ResourceOption) (*Simulated, error) {
	if args == nil {
		return nil, errors.New("cluster: args are required")
	}
	c := &Simulated{}
	if err := ctx.RegisterComponentResource("kolotoc:cluster:Simulated", name, c, opts...); err != nil {
		return nil, err
	}
	var names pulumi.StringArray
	for _, p := range args.Pools {
		for i := 0; i < p.Nodes; i++ {
			nodeArgs, err := renderNode(args, p, i)
			if err != nil {
				return nil, fmt.Errorf("cluster %q: %w", name, err)
			}
			n, err := corev1.NewNode(ctx, fmt.Sprintf("%s-%s-%d", name, p.Name, i), nodeArgs, pulumi.Parent(c))
			if err != nil {
				return nil, err
			}
			names = append(names, n.Metadata.Name().Elem())
			c.Nodes = append(c.Nodes, n)
		}
	}
	c.NodeNames = names.ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{"nodeNames": c.NodeNames}); err != nil {
		return nil, err
	}
	return c, nil
}

// NodeName is the name of the i-th node of a pool.
func NodeName(cluster, pool string, i int) string { return fmt.Sprintf("%s-%s-%d", cluster, pool, i) }

// NodeLabels are the labels every node of the pool carries, on every cloud.
func NodeLabels(p Pool) map[string]string {
	l := map[string]string{meta.PoolLabel: p.Name}
	for k, v := range p.Labels {
		l[k] = v
	}
	if p.MachineType != "" {
		l["node.kubernetes.io/instance-type"] = p.MachineType
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

func renderNode(args *SimulatedArgs, p Pool, i int) (*corev1.NodeArgs, error) {
	name := NodeName(args.Name, p.Name, i)
	capacity := map[string]string{"cpu": fmt.Sprint(p.CPUs), "memory": p.Memory, "pods": podsPerNode}
	if p.GPUsPerNode > 0 {
		capacity[meta.GPUResource] = fmt.Sprint(p.GPUsPerNode)
	}
	capJSON, err := json.Marshal(capacity) // json.Marshal sorts map keys: stable across runs
	if err != nil {
		return nil, err
	}
	labels := args.Labels.For("node")
	for k, v := range NodeLabels(p) {
		labels[k] = v
	}
	labels[meta.ClusterLabel] = args.Name
	labels["kubernetes.io/hostname"] = name
	labels["type"] = "kwok"
	var taints corev1.TaintArray
	for _, t := range NodeTaints(p) {
		taints = append(taints, corev1.TaintArgs{Key: pulumi.String(t.Key), Value: pulumi.String(t.Value), Effect: pulumi.String(t.Effect)})
	}
	return &corev1.NodeArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(name),
			Labels: pulumi.ToStringMap(labels),
			Annotations: pulumi.StringMap{
				KwokNodeAnnotation: pulumi.String("fake"),
				CapacityAnnotation: pulumi.String(string(capJSON)),
			},
		},
		Spec: &corev1.NodeSpecArgs{Taints: taints},
	}, nil
}
