// Package simulated is the entry of cloud simulated (kolotoc:cloud: simulated): the local test
// bed's cluster, whose pools are kwok-managed Nodes with the pools' labels, taints and capacity
// (components/cluster), beside its real node. It mirrors the clouds that create their clusters:
// their keys are accepted, their catalogues read, their file stores stood in for by an in-cluster
// NFS server, so that a copy of a cloud stack runs here unchanged. It registers itself with the
// stack (stacks.RegisterCloud); importing kolotoc/stacks/clouds registers it.
package simulated

import (
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation"

	"kolotoc/components/cluster"
	"kolotoc/components/meta"
	"kolotoc/stacks"
)

func init() { stacks.RegisterCloud(entry) }

var entry = &stacks.Cloud{
	Name:  stacks.CloudSimulated,
	Local: true,

	DevicePlugins:    []string{stacks.DevicePluginKolotoc},
	DevicePluginsWhy: "the local test bed runs no other",

	Defaults: func(c *stacks.Config) { meta.Fill(&c.Cluster.Kubeconfig, DefaultKubeconfig) },
	Check:    check,

	KubeconfigHint: " (start the local cluster first: `make cluster`)",
	Nodes:          deployNodes,
}

// DefaultKubeconfig: where `make cluster` writes the local cluster's kubeconfig, relative to the
// project directory (Pulumi runs the program there).
const DefaultKubeconfig = ".kolotoc/kubeconfig"

// check: the longest node name the simulated cloud generates, <cluster>-<pool>-<index>, is a
// DNS label.
func check(c *stacks.Config, v *stacks.Validator) {
	if c.Cloud != stacks.CloudSimulated {
		return
	}
	for i, p := range c.NodePools {
		if p.Real || validation.IsDNS1123Label(p.Name) != nil {
			continue
		}
		longest := fmt.Sprintf("%s-%s-%d", c.Cluster.Name, p.Name, max(p.Nodes, p.MaxNodes)-1)
		if len(longest) > validation.DNS1123LabelMaxLength {
			v.Add(fmt.Sprintf("nodePools[%d].name", i), p.Name, fmt.Sprintf("node name %q would be %d characters; at most %d (shorten cluster.name or the pool name)",
				longest, len(longest), validation.DNS1123LabelMaxLength))
		}
	}
}

// deployNodes registers the simulated node pools, one SimulatedNodePool each, ready once all its
// nodes are; pods must wait for them. They are registered after the namespace, its policies and
// pull secrets: the engine starts steps in the order they are registered, a few at a time (8 by
// default), which mattered while every node was a resource of its own (bench/scale: 10 s at 1024
// ranks before the namespace was created).
func deployNodes(ctx *pulumi.Context, c *stacks.Config, labels meta.Labels, provider *kubernetes.Provider) (*cluster.Simulated, error) {
	// A real pool is the local cluster's own node(s): nothing to register for it.
	var pools []cluster.Pool
	for _, p := range c.NodePools {
		if !p.Real {
			pools = append(pools, c.SimulatedPool(p))
		}
	}
	if len(pools) == 0 {
		return nil, nil
	}
	sim, err := cluster.NewSimulated(ctx, "cluster", &cluster.SimulatedArgs{Name: c.Cluster.Name, Pools: pools, Labels: labels},
		pulumi.Provider(provider))
	if err != nil {
		return nil, err
	}
	return sim, nil
}
