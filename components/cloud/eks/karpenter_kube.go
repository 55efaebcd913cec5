package eks

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/karpenter"
	"kolotoc/components/meta"
)

// Karpenter's release for AWS, pinned: v1.13.0, whose core (sigs.k8s.io/karpenter v1.13.0) is
// the one the local test bed runs for the simulated cloud, so that both read the same v1 API.
// Its chart comes from its OCI registry, rendered by the Kubernetes provider and registered
// object by object (pulumi-kubernetes' helm.v3.Chart, as Kueue's cloud install), its CRDs
// included; the controller image by tag
// (https://karpenter.sh/v1.13/getting-started/getting-started-with-karpenter/, step08; chart
// values: charts/karpenter/values.yaml of aws/karpenter-provider-aws).
const (
	KarpenterVersion   = "1.13.0"
	KarpenterChart     = "oci://public.ecr.aws/karpenter/karpenter"
	KarpenterImageRepo = "public.ecr.aws/karpenter/controller"
	// KarpenterReplicas: the chart's two controller replicas (one leads), each on a node of its
	// own (the chart's required anti-affinity) that Karpenter did not make (its node affinity
	// karpenter.sh/nodepool DoesNotExist): one when the fixed pools have one node only.
	KarpenterReplicas = 2
	// KarpenterCPU and KarpenterMemory are each replica's requests and limits, the guide's.
	KarpenterCPU    = "1"
	KarpenterMemory = "1Gi"

	// The Karpenter kinds Kolotoc writes (karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1
	// EC2NodeClass: https://karpenter.sh/v1.13/concepts/nodepools/,
	// https://karpenter.sh/v1.13/concepts/nodeclasses/).
	NodePoolAPIVersion      = karpenter.APIVersion
	NodePoolKind            = karpenter.NodePoolKind
	EC2NodeClassGroup       = "karpenter.k8s.aws"
	EC2NodeClassAPIVersion  = EC2NodeClassGroup + "/v1"
	EC2NodeClassKind        = "EC2NodeClass"
	InstanceTypeLabel       = karpenter.InstanceTypeLabel
	CapacityTypeLabel       = karpenter.CapacityTypeLabel
	ZoneLabel               = karpenter.ZoneLabel
	CapacitySpot            = karpenter.CapacitySpot
	CapacityOnDemand        = karpenter.CapacityOnDemand
	KarpenterConsolidation  = karpenter.Consolidation
	KarpenterDisruptBudget  = karpenter.DisruptBudget
	KarpenterExpireAfter    = karpenter.ExpireAfter
	karpenterRootDeviceSize = "100Gi" // nodeDiskGiB, as Karpenter writes a size

	// KarpenterAMIAlias: the EKS-optimized Amazon Linux 2023 AMIs of release v20260520. With an
	// alias Karpenter picks the image's variant per instance type, the NVIDIA one (driver and
	// container toolkit, as the node groups' AL2023_x86_64_NVIDIA) for a GPU instance type
	// (nodeclasses, "spec.amiSelectorTerms": "Unless using an alias, Karpenter cannot detect
	// requirements other than architecture"); a pinned version rather than latest, as the page
	// recommends for production, so that no AMI release replaces nodes by drift. That release is
	// published for Kubernetes 1.29 to 1.36 (Karpenter's own AMI suite pins it for 1.36).
	KarpenterAMIAlias = "al2023@v20260520"
	// SpotCapacityLabel is the label EKS sets on a managed group's Spot nodes, which Kolotoc's
	// pods that must not run on Spot avoid (meta.NotOnSpot); Karpenter's Spot nodes carry it too.
	SpotCapacityLabel = "eks.amazonaws.com/capacityType"
)

// KarpenterArgs are the inputs of Karpenter's Kubernetes side, once the cluster exists.
type KarpenterArgs struct {
	Cluster *Cluster     // the cluster, its Karpenter (AWS side), security and placement groups
	Args    *ClusterArgs // the cluster's inputs: its pools and subnets
	// Zones are the created subnets' zones, in subnet order; none with an existing VPC (then
	// the subnets alone place the nodes).
	Zones []string
	// Replicas: the controller's replicas (KarpenterReplicas, or fewer: one per fixed node
	// without taints at most).
	Replicas int
	Tags     map[string]string // on every instance, volume and interface Karpenter launches
	Labels   meta.Labels       // the stack's labels, on the NodePools and EC2NodeClasses
}

// Karpenter is the chart and the Karpenter pools.
type Karpenter struct {
	pulumi.ResourceState
	Chart       *helmv3.Chart
	NodeClasses map[string]*apiextensions.CustomResource // by pool name
	NodePools   map[string]*apiextensions.CustomResource
	// Ready is what pods on a Karpenter pool wait for: its NodePools, each Ready once Karpenter
	// has resolved its EC2NodeClass (subnets, security groups, AMIs, instance profile).
	Ready []pulumi.Resource
}

// NewKarpenter registers Karpenter's chart and one EC2NodeClass and NodePool per Karpenter pool.
func NewKarpenter(ctx *pulumi.Context, name string, args *KarpenterArgs, opts ...pulumi.ResourceOption) (*Karpenter, error) {
	if args == nil || args.Cluster == nil || args.Cluster.Karpenter == nil || args.Args == nil {
		return nil, errors.New("karpenter: a cluster with Karpenter pools is required")
	}
	k := &Karpenter{NodeClasses: map[string]*apiextensions.CustomResource{}, NodePools: map[string]*apiextensions.CustomResource{}}
	if err := ctx.RegisterComponentResource("kolotoc:eks:Karpenter", name, k, opts...); err != nil {
		return nil, fmt.Errorf("karpenter %q: %w", name, err)
	}
	parent := pulumi.Parent(k)
	// The controller needs its role (through the Pod Identity agent), its queue and a node of a
	// group to run on; Karpenter's nodes need their role's access entry.
	deps := append([]pulumi.Resource{args.Cluster.PodIdentity}, args.Cluster.Karpenter.Ready...)
	for _, ng := range args.Cluster.NodeGroups {
		deps = append(deps, ng)
	}
	chart, err := helmv3.NewChart(ctx, name, RenderKarpenterChart(args.Args.Name, args.Cluster.Karpenter.QueueName, args.Replicas),
		parent, pulumi.DependsOn(deps))
	if err != nil {
		return nil, fmt.Errorf("karpenter %q: chart: %w", name, err)
	}
	k.Chart = chart
	for _, p := range args.Args.Pools {
		if !p.Karpenter {
			continue
		}
		class, err := apiextensions.NewCustomResource(ctx, name+"-"+p.Name+"-class", RenderEC2NodeClass(args, p), parent,
			pulumi.DependsOnInputs(chart.Ready))
		if err != nil {
			return nil, fmt.Errorf("karpenter %q: EC2NodeClass of %s: %w", name, p.Name, err)
		}
		pool, err := apiextensions.NewCustomResource(ctx, name+"-"+p.Name, RenderKarpenterNodePool(args, p), parent,
			pulumi.DependsOn([]pulumi.Resource{class}), pulumi.DependsOnInputs(chart.Ready))
		if err != nil {
			return nil, fmt.Errorf("karpenter %q: NodePool of %s: %w", name, p.Name, err)
		}
		k.NodeClasses[p.Name], k.NodePools[p.Name] = class, pool
		k.Ready = append(k.Ready, class, pool)
	}
	return k, meta.RegisterOutputs(ctx, k, pulumi.Map{})
}

// RenderKarpenterChart is Karpenter's chart at KarpenterVersion in KarpenterNamespace, as the
// guide installs it: the cluster's name and interruption queue (settings.clusterName,
// settings.interruptionQueue), the controller's requests and limits; the image by tag; the
// service account Pod Identity gives the controller's role to.
func RenderKarpenterChart(cluster, queue string, replicas int) helmv3.ChartArgs {
	res := pulumi.Map{"cpu": pulumi.String(KarpenterCPU), "memory": pulumi.String(KarpenterMemory)}
	return helmv3.ChartArgs{
		Chart:     pulumi.String(KarpenterChart),
		Version:   pulumi.String(KarpenterVersion),
		Namespace: pulumi.String(KarpenterNamespace),
		Values: pulumi.Map{
			"fullnameOverride": pulumi.String("karpenter"),
			"replicas":         pulumi.Int(replicas),
			"serviceAccount":   pulumi.Map{"create": pulumi.Bool(true), "name": pulumi.String(KarpenterServiceAccount)},
			"settings": pulumi.Map{
				"clusterName": pulumi.String(cluster), "interruptionQueue": pulumi.String(queue),
			},
			"controller": pulumi.Map{
				"image":     pulumi.Map{"repository": pulumi.String(KarpenterImageRepo), "tag": pulumi.String(KarpenterVersion)},
				"resources": pulumi.Map{"requests": res, "limits": res},
			},
		},
	}
}

// KarpenterPoolName is a Karpenter pool's NodePool and EC2NodeClass name, <cluster>-<pool> (as
// its placement group's).
func KarpenterPoolName(a *ClusterArgs, p Pool) string { return a.Name + "-" + p.Name }

// RenderEC2NodeClass is a pool's EC2NodeClass: the pinned AL2023 AMIs (KarpenterAMIAlias), the
// node role (spec.role: Karpenter makes the instance profile), exactly the pool's subnets as its
// node group would have (all the cluster's, or a compact pool's one) and the cluster security
// group EKS gives managed nodes, selected by ID, plus the EFA security group on an EFA pool (on
// every interface: Karpenter gives an EFA instance's interfaces the class's groups); a compact
// pool's cluster placement group (spec.placementGroupSelector, by name); the node groups' root
// volume; the stack's tags.
func RenderEC2NodeClass(a *KarpenterArgs, p Pool) *apiextensions.CustomResourceArgs {
	c := a.Cluster
	var subnets pulumi.Array
	for _, s := range poolSubnets(a.Args, p) {
		subnets = append(subnets, pulumi.Map{"id": s})
	}
	groups := pulumi.Array{pulumi.Map{"id": c.NodeSecurityGroupID}}
	if p.EFAs > 0 && c.EFASecurityGroup != nil {
		groups = append(groups, pulumi.Map{"id": c.EFASecurityGroup.ID()})
	}
	spec := pulumi.Map{
		"role":                       c.Karpenter.NodeRole.Name,
		"amiSelectorTerms":           pulumi.Array{pulumi.Map{"alias": pulumi.String(KarpenterAMIAlias)}},
		"subnetSelectorTerms":        subnets,
		"securityGroupSelectorTerms": groups,
		"blockDeviceMappings": pulumi.Array{pulumi.Map{
			"deviceName": pulumi.String(rootDevice),
			"ebs": pulumi.Map{
				"volumeSize": pulumi.String(karpenterRootDeviceSize), "volumeType": pulumi.String("gp3"),
				"encrypted": pulumi.Bool(true), "deleteOnTermination": pulumi.Bool(true),
			},
		}},
	}
	if len(a.Tags) > 0 {
		spec["tags"] = pulumi.ToStringMap(a.Tags)
	}
	if pg := c.PlacementGroups[p.Name]; pg != nil {
		spec["placementGroupSelector"] = pulumi.Map{"name": pg.Name}
	}
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(EC2NodeClassAPIVersion),
		Kind:       pulumi.String(EC2NodeClassKind),
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(KarpenterPoolName(a.Args, p)),
			Labels: pulumi.ToStringMap(a.Labels.For("node-class")),
		},
		OtherFields: kubernetes.UntypedArgs{"spec": spec},
	}
}

// KarpenterPoolZones are the zones a Karpenter pool's nodes may be in: a compact pool's one, a
// spread pool's subnets' (none known with an existing VPC: its subnets place the nodes).
func KarpenterPoolZones(a *KarpenterArgs, p Pool) []string {
	switch {
	case len(a.Zones) == 0:
		return nil
	case p.Compact && p.Subnet >= 0 && p.Subnet < len(a.Zones):
		return []string{a.Zones[p.Subnet]}
	default:
		return a.Zones
	}
}

// RenderKarpenterNodePool is a pool's NodePool: nodes of its one instance type, capacity type and
// zones, carrying the labels and taints its node group's nodes would (and the Spot label EKS sets
// on those); at most MaxNodes of them and their GPUs (limits); an emptied node deleted
// ScaleDownAfter after its last pod left (consolidationPolicy WhenEmpty), all at once (a budget
// of 100%); never expired (expireAfter Never: expiry ignores karpenter.sh/do-not-disrupt and
// would take a node from a running rank). The provider waits until the NodePool is Ready.
func RenderKarpenterNodePool(a *KarpenterArgs, p Pool) *apiextensions.CustomResourceArgs {
	labels := map[string]string{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	delete(labels, InstanceTypeLabel) // set by Karpenter from the instance it launched
	if p.Spot {
		labels[SpotCapacityLabel] = "SPOT"
	}
	return karpenter.NodePool(karpenter.Pool{
		Name: KarpenterPoolName(a.Args, p), ObjectLabels: a.Labels.For("node-pool"),
		ClassGroup: EC2NodeClassGroup, ClassKind: EC2NodeClassKind,
		InstanceType: p.InstanceType, Spot: p.Spot, Zones: KarpenterPoolZones(a, p),
		NodeLabels: labels, Taints: p.Taints,
		MaxNodes: p.MaxNodes, GPUsPerNode: p.GPUs, ScaleDownAfter: p.ScaleDownAfter,
	})
}
