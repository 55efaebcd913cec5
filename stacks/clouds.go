package stacks

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/cluster"
	"kolotoc/components/meta"
)

// Logical names of what the clouds register; resource names on the cloud derive from
// cluster.name (default kolotoc-<stack>), never from these.
const (
	CloudClusterName = "cluster"
	CloudStoreName   = "shared-store"
	CloudNetworkName = "network"
)

// CloudResult is what a cloud hands to the rest of the stack besides the Kubernetes provider: how
// the shared volume reaches its file store, and the stack outputs of the cluster. It is nil for
// the simulated cloud and an existing cluster; its methods accept that.
type CloudResult struct {
	Store   *CloudVolume // how the shared volume reaches the file store the cloud made; nil for none
	Outputs pulumi.Map
	Kube    KubeAccess // how a user's kubectl reaches the cluster (kubeaccess.go)
	// InCluster, if set, registers what the cloud puts inside its cluster once the stack's
	// Kubernetes provider exists (aws: Karpenter and its pools at zero); what it returns joins
	// what the workloads wait for, as the cluster's own resources do.
	InCluster func(ctx *pulumi.Context, provider *kubernetes.Provider) ([]pulumi.Resource, error)
}

// volume is how the shared volume reaches the cloud's file store, nil when the cloud made none.
func (r *CloudResult) volume() *CloudVolume {
	if r == nil {
		return nil
	}
	return r.Store
}

// exports are the cloud's stack outputs: the cluster's name and its kubeconfig (a secret).
func (r *CloudResult) exports() pulumi.Map {
	if r == nil {
		return nil
	}
	return r.Outputs
}

// deployCloud creates the stack's cluster and file store on a cloud that creates them (its
// entry's Deploy), and the one Kubernetes provider every component uses, built from the
// cluster's kubeconfig.
func deployCloud(ctx *pulumi.Context, c *Config) (*kubernetes.Provider, []pulumi.Resource, *CloudResult, error) {
	cl := c.CloudEntry()
	if cl.Deploy == nil {
		return nil, nil, nil, fmt.Errorf("%s:cloud = %s: not a cloud", ConfigNamespace, c.Cloud)
	}
	kubeconfig, deps, res, err := cl.Deploy(ctx, c)
	if err != nil {
		return nil, nil, nil, err
	}
	res.Outputs["clusterName"] = pulumi.String(c.Cluster.Name)
	res.Outputs["kubeconfig"] = kubeconfig
	provider, err := kubernetes.NewProvider(ctx, "k8s", &kubernetes.ProviderArgs{
		Kubeconfig: kubeconfig,
		// Only a change of cluster replaces the provider (and so every object); new
		// credentials for the same cluster are an update.
		ClusterIdentifier:     pulumi.String(c.Cluster.Name),
		EnableServerSideApply: pulumi.Bool(true),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if res.InCluster != nil {
		more, err := res.InCluster(ctx, provider)
		if err != nil {
			return nil, nil, nil, err
		}
		deps = append(deps, more...)
	}
	return provider, deps, res, nil
}

// CloudNodeLabels are the Kubernetes labels of a pool's cloud nodes: those of the simulated
// nodes (the pool label that every workload selects on, the GPU labels, the pool's own) without
// node.kubernetes.io/instance-type, which the kubelet sets itself and the clouds refuse, and
// without the spot label, which the cloud sets itself under its reserved prefix.
func (c *Config) CloudNodeLabels(p NodePool) map[string]string {
	l := cluster.NodeLabels(c.SimulatedPool(p))
	delete(l, "node.kubernetes.io/instance-type")
	if key := spotLabel(p); key != "" {
		delete(l, key)
	}
	return l
}

// CloudLabels are the labels (GCP) and tags (AWS, Azure) of every cloud resource: which stack of
// which program made it. GCP label values are lower-case letters, digits, '-' and '_'.
func CloudLabels(c *Config) map[string]string {
	clean := func(s string) string {
		s = strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				return r
			case r >= 'A' && r <= 'Z':
				return r + 'a' - 'A'
			}
			return '-'
		}, s)
		if len(s) > 63 {
			s = s[:63]
		}
		return s
	}
	return map[string]string{
		"app":           meta.PartOf,
		"kolotoc-stack": clean(c.Stack),
		"managed-by":    "pulumi",
	}
}

// GiB is a validated quantity in GiB, rounded up.
func GiB(q string) int {
	v := resource.MustParse(q)
	return int((v.Value() + (1<<30 - 1)) >> 30)
}

// deployClusterOrCloud creates the cluster on a cloud, or reaches the simulated or existing one.
func deployClusterOrCloud(ctx *pulumi.Context, c *Config, labels meta.Labels) (*kubernetes.Provider, []pulumi.Resource, *CloudResult, error) {
	if c.CloudEntry().Creates {
		return deployCloud(ctx, c)
	}
	provider, err := deployCluster(ctx, c)
	return provider, nil, nil, err
}
