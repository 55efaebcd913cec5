// Package karpenter renders the Karpenter NodePool every Kolotoc pool at zero becomes, on the
// simulated cloud (with Karpenter's kwok provider's KWOKNodeClass) and on EKS (with an
// EC2NodeClass): one body, so that what the test bed grows is what EKS grows.
package karpenter

import (
	"fmt"

	"kolotoc/components/cloud/kubeaccess"
	"kolotoc/components/meta"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Karpenter's NodePool (karpenter.sh/v1, Karpenter 1.x: https://karpenter.sh/v1.13/concepts/nodepools/)
// and the well-known keys it schedules on (https://karpenter.sh/v1.13/concepts/scheduling/).
const (
	APIVersion        = "karpenter.sh/v1"
	NodePoolKind      = "NodePool"
	InstanceTypeLabel = "node.kubernetes.io/instance-type"
	CapacityTypeLabel = "karpenter.sh/capacity-type"
	ZoneLabel         = "topology.kubernetes.io/zone"
	CapacitySpot      = "spot"
	CapacityOnDemand  = "on-demand"
	// A pool's emptied nodes go after its scaleDownAfter, all at once if need be; none expires
	// (expiry would ignore karpenter.sh/do-not-disrupt and take a node from a running rank).
	Consolidation = "WhenEmpty"
	DisruptBudget = "100%"
	ExpireAfter   = "Never"
)

// Pool is what a NodePool says of a Kolotoc pool.
type Pool struct {
	Name                  string            // the NodePool's (and its node class's) name
	ObjectLabels          map[string]string // the NodePool object's own labels
	ClassGroup, ClassKind string            // its node class
	InstanceType          string
	Spot                  bool
	Zones                 []string // none: any zone the class offers
	NodeLabels            map[string]string
	Taints                []kubeaccess.Taint
	MaxNodes, GPUsPerNode int
	ScaleDownAfter        string
}

// NodePool renders the pool's NodePool. The provider waits until Karpenter has taken it (its
// class found and ready), so that no pod of the stack waits on a pool no autoscaler acts on.
func NodePool(p Pool) *apiextensions.CustomResourceArgs {
	capacity := CapacityOnDemand
	if p.Spot {
		capacity = CapacitySpot
	}
	requirement := func(key string, values ...string) pulumi.Map {
		return pulumi.Map{"key": pulumi.String(key), "operator": pulumi.String("In"), "values": pulumi.ToStringArray(values)}
	}
	requirements := pulumi.Array{requirement(InstanceTypeLabel, p.InstanceType), requirement(CapacityTypeLabel, capacity)}
	if len(p.Zones) > 0 {
		requirements = append(requirements, requirement(ZoneLabel, p.Zones...))
	}
	spec := pulumi.Map{
		"nodeClassRef": pulumi.StringMap{"group": pulumi.String(p.ClassGroup), "kind": pulumi.String(p.ClassKind), "name": pulumi.String(p.Name)},
		"requirements": requirements,
		"expireAfter":  pulumi.String(ExpireAfter),
	}
	var taints pulumi.Array
	for _, t := range p.Taints {
		taints = append(taints, pulumi.StringMap{"key": pulumi.String(t.Key), "value": pulumi.String(t.Value), "effect": pulumi.String(t.Effect)})
	}
	if len(taints) > 0 {
		spec["taints"] = taints
	}
	limits := pulumi.Map{"nodes": pulumi.String(fmt.Sprint(p.MaxNodes))}
	if p.GPUsPerNode > 0 {
		limits[meta.GPUResource] = pulumi.String(fmt.Sprint(p.MaxNodes * p.GPUsPerNode))
	}
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(APIVersion),
		Kind:       pulumi.String(NodePoolKind),
		Metadata: &metav1.ObjectMetaArgs{
			Name:        pulumi.String(p.Name),
			Labels:      pulumi.ToStringMap(p.ObjectLabels),
			Annotations: pulumi.StringMap{meta.WaitForAnnotation: pulumi.String("condition=Ready")},
		},
		OtherFields: kubernetes.UntypedArgs{
			"spec": pulumi.Map{
				"template": pulumi.Map{
					"metadata": pulumi.Map{"labels": pulumi.ToStringMap(p.NodeLabels)},
					"spec":     spec,
				},
				"limits": limits,
				"disruption": pulumi.Map{
					"consolidationPolicy": pulumi.String(Consolidation),
					"consolidateAfter":    pulumi.String(p.ScaleDownAfter),
					"budgets":             pulumi.Array{pulumi.StringMap{"nodes": pulumi.String(DisruptBudget)}},
				},
			},
		},
	}
}
