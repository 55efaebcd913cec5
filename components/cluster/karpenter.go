package cluster

import (
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/karpenter"
	"kolotoc/components/meta"
)

// A simulated pool that autoscales (Pool.Autoscaled) is not a SimulatedNodePool: it is a Karpenter
// NodePool and its KWOKNodeClass, and the local cluster's Karpenter (sigs.k8s.io/karpenter's core
// with its kwok cloud provider, started by testbed/cluster/cluster.sh) creates its Nodes when pods
// that only its nodes can hold are Pending, and deletes them once they are empty. That is what
// Karpenter does on EKS with an EC2NodeClass, and what GKE's and AKS's autoscalers do with a pool
// whose minimum is zero: the stack registers the pool's bounds, never its nodes.
const (
	// KarpenterAPIVersion and NodePoolKind: Karpenter's NodePool (karpenter.sh/v1, the API of
	// Karpenter 1.x; https://karpenter.sh/docs/concepts/nodepools/).
	KarpenterAPIVersion = karpenter.APIVersion
	NodePoolKind        = karpenter.NodePoolKind
	// NodePoolType is the NodePool's Pulumi resource type.
	NodePoolType = "kubernetes:" + KarpenterAPIVersion + ":" + NodePoolKind
	// KWOKNodeClassAPIVersion and KWOKNodeClassKind: the node class of Karpenter's kwok provider
	// (sigs.k8s.io/karpenter kwok/apis), the simulated cloud's counterpart of EKS's EC2NodeClass.
	KWOKNodeClassGroup      = "karpenter.kwok.sh"
	KWOKNodeClassAPIVersion = KWOKNodeClassGroup + "/v1alpha1"
	KWOKNodeClassKind       = "KWOKNodeClass"
	// KWOKNodeClassType is the KWOKNodeClass's Pulumi resource type.
	KWOKNodeClassType = "kubernetes:" + KWOKNodeClassAPIVersion + ":" + KWOKNodeClassKind

	// Well-known keys Karpenter schedules on (https://karpenter.sh/docs/concepts/scheduling/).
	InstanceTypeLabel = karpenter.InstanceTypeLabel
	CapacityTypeLabel = karpenter.CapacityTypeLabel
	// CapacitySpot and CapacityOnDemand are the values of CapacityTypeLabel.
	CapacitySpot     = karpenter.CapacitySpot
	CapacityOnDemand = karpenter.CapacityOnDemand
)

// nodePoolName is the NodePool's (and its KWOKNodeClass's) name: the pool name the fixed pools'
// SimulatedNodePool would have, <cluster>-<pool>.
func nodePoolName(args *SimulatedArgs, p Pool) string { return PoolName(args.Name, p.Name) }

// renderNodeClass is the pool's KWOKNodeClass. Karpenter's kwok provider registers the Node as soon
// as the claim is launched (no registration delay): a cloud's boot time is not simulated.
func renderNodeClass(args *SimulatedArgs, p Pool) *apiextensions.CustomResourceArgs {
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(KWOKNodeClassAPIVersion),
		Kind:       pulumi.String(KWOKNodeClassKind),
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(nodePoolName(args, p)),
			Labels: pulumi.ToStringMap(args.Labels.For("node-class")),
		},
	}
}

// renderNodePool is the pool's Karpenter NodePool: nodes of the pool's one machine type
// (node.kubernetes.io/instance-type), capacity type and zone, carrying the pool's labels and
// taints exactly as a fixed pool's nodes do; at most MaxNodes of them (limits.nodes); emptied
// nodes deleted ScaleDownAfter after their last pod left (consolidationPolicy WhenEmpty), all at
// once (a budget of 100%); never expired (expireAfter Never: in Karpenter v1 expiry ignores
// do-not-disrupt, so a node would be taken from a running rank).
func renderNodePool(args *SimulatedArgs, p Pool) *apiextensions.CustomResourceArgs {
	// The labels a fixed pool's nodes carry (renderPool), but the instance type: a requirement,
	// which Karpenter sets on the node from the instance type it launched.
	labels := args.Labels.PodLabels("node")
	for k, v := range NodeLabels(p) {
		labels[k] = v
	}
	labels[meta.ClusterLabel] = args.Name
	labels["type"] = "kwok"
	delete(labels, InstanceTypeLabel)
	var zones []string
	if p.Zone != "" {
		zones = []string{p.Zone}
	}
	return karpenter.NodePool(karpenter.Pool{
		Name: nodePoolName(args, p), ObjectLabels: args.Labels.For("node-pool"),
		ClassGroup: KWOKNodeClassGroup, ClassKind: KWOKNodeClassKind,
		InstanceType: p.MachineType, Spot: p.Spot, Zones: zones,
		NodeLabels: labels, Taints: NodeTaints(p),
		MaxNodes: p.MaxNodes, GPUsPerNode: p.GPUsPerNode, ScaleDownAfter: p.ScaleDownAfter,
	})
}

// registerAutoscaled registers an autoscaled pool's KWOKNodeClass and NodePool under c; the
// NodePool is what the pool's pods may wait for (it is Ready once Karpenter has checked its class).
func registerAutoscaled(ctx *pulumi.Context, c *Simulated, name string, args *SimulatedArgs, p Pool) (pulumi.Resource, error) {
	class, err := apiextensions.NewCustomResource(ctx, fmt.Sprintf("%s-%s-class", name, p.Name), renderNodeClass(args, p), pulumi.Parent(c))
	if err != nil {
		return nil, fmt.Errorf("node class %q: %w", nodePoolName(args, p), err)
	}
	pool, err := apiextensions.NewCustomResource(ctx, fmt.Sprintf("%s-%s", name, p.Name), renderNodePool(args, p),
		pulumi.Parent(c), pulumi.DependsOn([]pulumi.Resource{class}))
	if err != nil {
		return nil, fmt.Errorf("node pool %q: %w", nodePoolName(args, p), err)
	}
	return pool, nil
}
