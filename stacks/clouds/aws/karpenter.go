package aws

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/eks"
	"kolotoc/components/meta"
	"kolotoc/stacks"
)

// A pool at zero (minNodes: 0, maxNodes above it) on aws is Karpenter's: no managed node group
// (which keeps its size, and no autoscaler grows it), but a Karpenter NodePool and EC2NodeClass
// that make its nodes when pods need them and delete them once empty (components/cloud/eks
// karpenter.go). Karpenter v1.13 gives such a pool what its node group would have: its instance
// type, Spot, its subnets and zone, a compact pool's cluster placement group
// (EC2NodeClass placementGroupSelector), an EFA pool's interfaces (Karpenter attaches the
// instance type's EFA interfaces when pods request vpc.amazonaws.com/efa, as the towers do), its
// labels and taints. What it cannot give is refused here (checkKarpenterPools).

// karpenterPool reports whether a pool is Karpenter's on aws: autoscaled from zero.
func karpenterPool(p stacks.NodePool) bool { return p.Autoscaled() && p.Min() == 0 }

// controllerNodes are the nodes Karpenter's controller may run on: those of the fixed pools
// without taints (its chart tolerates none of Kolotoc's, and keeps it off Karpenter's nodes).
func controllerNodes(c *stacks.Config) int {
	n := 0
	for _, p := range c.NodePools {
		if !karpenterPool(p) && p.GPUsPerNode == 0 && len(p.Taints) == 0 {
			n += p.Min()
		}
	}
	return n
}

// checkKarpenterPools refuses, on a pool at zero, what Karpenter cannot give it or what means
// nothing without a node group; and a stack with Karpenter pools but no node for its controller.
func checkKarpenterPools(c *stacks.Config, v *stacks.Validator) {
	first := -1
	for i, p := range c.NodePools {
		if !karpenterPool(p) {
			continue
		}
		if first < 0 {
			first = i
		}
		key := fmt.Sprintf("nodePools[%d]", i)
		if p.Nodes != 0 {
			v.Add(key+".nodes", strconv.Itoa(p.Nodes), "on aws a pool at zero is Karpenter's, which makes a node only for a pod that needs it; allowed: 0 (unset) with minNodes: 0")
		}
		if len(p.Devices.Values) > 0 {
			v.Add(key+".devices", strings.Join(meta.SortedKeys(p.Devices.Values), ","),
				"on aws a pool at zero is Karpenter's, which launches a node only for resources its instance type has (GPUs, EFA); a pod asking for any other would wait for ever; "+
					"allowed: none, or minNodes 1 or more (a managed node group)")
		}
		if p.CloudName != "" {
			v.Add(key+".cloudName", p.CloudName, "names the EKS node group; a pool at zero has none (Karpenter's NodePool is <cluster.name>-<name>); allowed: unset")
		}
	}
	if first >= 0 && controllerNodes(c) == 0 {
		v.Add(fmt.Sprintf("nodePools[%d].minNodes", first), "0",
			"Karpenter's controller runs on a node it does not make: on aws a stack with a pool at zero needs another pool of 1 or more nodes without taints (a CPU pool); "+
				"allowed: such a pool, or minNodes 1 or more here")
	}
}

// karpenter registers Karpenter's chart and the Karpenter pools in the cluster, once the stack's
// Kubernetes provider exists (stacks.CloudResult.InCluster).
func karpenter(c *stacks.Config, cl *eks.Cluster, args *eks.ClusterArgs, zones []string) func(*pulumi.Context, *kubernetes.Provider) ([]pulumi.Resource, error) {
	return func(ctx *pulumi.Context, provider *kubernetes.Provider) ([]pulumi.Resource, error) {
		k, err := eks.NewKarpenter(ctx, "karpenter", &eks.KarpenterArgs{
			Cluster: cl, Args: args, Zones: zones,
			Replicas: min(eks.KarpenterReplicas, controllerNodes(c)),
			Tags:     stacks.CloudLabels(c),
			Labels:   meta.Labels{Instance: c.Stack, Version: stacks.Version},
		}, pulumi.Provider(provider))
		if err != nil {
			return nil, err
		}
		return k.Ready, nil
	}
}
