// Package eks makes a stack's cluster on AWS: a VPC (or existing subnets), the cluster and node
// IAM roles, the EKS cluster, one managed node group per configured pool (NVIDIA AMI for GPU
// pools, the GPU taint, the Kolotoc pool label) or, for a pool at zero, Karpenter's NodePool and
// EC2NodeClass with what Karpenter needs on AWS (karpenter.go, karpenter_kube.go), the kubeconfig
// that reaches it, and an EFS file system with its CSI driver for the shared storage. It is the only package that imports the AWS
// SDK, so that only the stack layer pays for compiling it.
package eks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/kubeaccess"
	"kolotoc/components/meta"
)

// Managed policies of the roles, as AWS documents them for EKS.
var (
	ClusterPolicies = []string{"arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"}
	NodePolicies    = []string{
		"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
		"arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
		"arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
	}
)

const (
	// AMIs of the node groups: Amazon Linux 2023; the NVIDIA variant carries the GPU driver and
	// the container toolkit (the device plugin runs as a Kolotoc DaemonSet).
	GPUAMI = "AL2023_x86_64_NVIDIA"
	CPUAMI = "AL2023_x86_64_STANDARD"
	// nodeDiskGiB: root volume per node (GiB); training images are 10-20 GB each and EKS's
	// 20 GiB default fills after two of them.
	nodeDiskGiB = 100
	// PodIdentityAddon runs the agent that hands IAM roles to pods (the EFS CSI controller's).
	PodIdentityAddon = "eks-pod-identity-agent"
	// VPCCNIAddon is the pod network. Kolotoc installs it as a managed add-on, rather than
	// leaving EKS's self-managed copy, to turn on its network policy agent: without it
	// NetworkPolicy objects are not enforced on EKS.
	VPCCNIAddon = "vpc-cni"
	// VPCCNIConfiguration is the add-on's configuration: the network policy agent on.
	VPCCNIConfiguration = `{"enableNetworkPolicy":"true"}`
)

// NodeGroupTimeouts: a node group of p4d/p5 instances has taken over 30 minutes to become
// ACTIVE when capacity is scarce; the provider's default would fail a healthy `pulumi up`.
var NodeGroupTimeouts = &pulumi.CustomTimeouts{Create: "90m", Update: "90m", Delete: "45m"}

// Taint is a node taint (one type on every cloud).
type Taint = kubeaccess.Taint

// Pool is one managed node group.
type Pool struct {
	Name string // the pool's Kolotoc name; the node group's name starts with it (NamePrefix)
	// CloudName pins the node group's name on EKS (at most 63 characters); empty = the provider
	// makes a new one from NamePrefix at each creation, so a replacement can create first.
	CloudName string
	// DeleteFirst: a replacement deletes the old group before creating the new one (quota for
	// one group only, and no GPUs between the two); otherwise the new group is up before the old
	// goes. Required with CloudName: one name cannot exist twice.
	DeleteFirst  bool
	InstanceType string            // e.g. p4d.24xlarge
	Nodes        int               // desired size when created
	MinNodes     int               // minimum size
	MaxNodes     int               // maximum size
	GPUs         int               // GPUs per node; selects the NVIDIA AMI
	Spot         bool              // SPOT capacity
	Labels       map[string]string // every Kubernetes label of the nodes
	Taints       []Taint           // every taint of the nodes, the GPU taint included
	// Compact: the group runs in one subnet (ClusterArgs.SubnetIDs[Subnet], one zone) and in a
	// cluster placement group of its own (fabric.go).
	Compact bool
	Subnet  int // index into ClusterArgs.SubnetIDs of a compact group's subnet
	EFAs    int // EFA interfaces per node, one per network card; 0 = none
	// Karpenter: the pool has no node group. It sits at zero nodes and Karpenter makes its nodes
	// when pods need them, up to MaxNodes, through a NodePool and an EC2NodeClass of its own
	// (karpenter.go); its placement group and EFA security group are made as a node group's.
	// Nodes and MinNodes are then 0.
	Karpenter bool
	// ScaleDownAfter (Karpenter): how long an emptied node stays, a Kubernetes duration ("10m").
	ScaleDownAfter string
}

// ClusterArgs are the inputs of an EKS cluster.
type ClusterArgs struct {
	Name              string               // EKS cluster name; the IAM roles are <Name>-cluster and <Name>-nodes
	Region            string               // for the kubeconfig's `aws eks get-token`
	KubernetesVersion string               // empty = EKS's default
	SubnetIDs         []pulumi.StringInput // subnets of the control plane's interfaces and of the nodes
	VPCID             pulumi.StringInput   // the subnets' VPC, for the EFA security group
	Pools             []Pool

	AuthorizedNetworks []string // CIDRs allowed to reach the public endpoint; empty = any
	PrivateEndpoint    bool     // no public endpoint: the API server is reached from the VPC only
	Protect            bool     // refuse `pulumi destroy` of the cluster (EKS has no deletion protection of its own)
	// BlockStorage: something claims block volumes (etcd's members), so the cluster gets the EBS
	// CSI driver add-on, its role and a default StorageClass (ebs.go).
	BlockStorage bool
}

// Cluster is the EKS cluster, its roles and node groups.
type Cluster struct {
	pulumi.ResourceState
	Cluster     *eks.Cluster
	ClusterName pulumi.StringOutput
	Endpoint    pulumi.StringOutput
	Kubeconfig  pulumi.StringOutput // secret
	// NodeSecurityGroupID is the cluster security group EKS attaches to managed nodes.
	NodeSecurityGroupID pulumi.StringOutput
	NodeGroups          []*eks.NodeGroup
	// EFASecurityGroup lets EFA interfaces reach one another (fabric.go); nil without EFA pools.
	EFASecurityGroup *ec2.SecurityGroup
	// LaunchTemplates and PlacementGroups of the compact and EFA pools, by pool name.
	LaunchTemplates map[string]*ec2.LaunchTemplate
	PlacementGroups map[string]*ec2.PlacementGroup
	PodIdentity     *eks.Addon
	// EBSCSI is the EBS CSI driver add-on (ClusterArgs.BlockStorage), nil without it.
	EBSCSI *eks.Addon
	// VPCCNI is the managed pod network with its network policy agent; the node groups wait for
	// it, so that no pod runs before the policies are enforced.
	VPCCNI *eks.Addon
	// Karpenter is what Karpenter needs on AWS (karpenter.go), nil without a Karpenter pool.
	Karpenter *KarpenterAWS
}

// NewCluster registers the cluster.
func NewCluster(ctx *pulumi.Context, name string, args *ClusterArgs, opts ...pulumi.ResourceOption) (*Cluster, error) {
	if args == nil {
		return nil, errors.New("eks: args are required")
	}
	if args.Name == "" || len(args.SubnetIDs) < 2 || len(args.Pools) == 0 {
		return nil, fmt.Errorf("eks %q: a name, subnets in two zones and at least one pool are required", name)
	}
	c := &Cluster{}
	if err := ctx.RegisterComponentResource("kolotoc:eks:Cluster", name, c, opts...); err != nil {
		return nil, fmt.Errorf("eks %q: %w", name, err)
	}
	parent := pulumi.Parent(c)

	clusterRole, clusterAttached, err := newRole(ctx, name+"-cluster", args.Name+"-cluster",
		TrustPolicy("eks.amazonaws.com", "sts:AssumeRole"), ClusterPolicies, parent)
	if err != nil {
		return nil, fmt.Errorf("eks %q: %w", name, err)
	}
	nodeRole, nodeAttached, err := newRole(ctx, name+"-nodes", args.Name+"-nodes",
		TrustPolicy("ec2.amazonaws.com", "sts:AssumeRole"), NodePolicies, parent)
	if err != nil {
		return nil, fmt.Errorf("eks %q: %w", name, err)
	}

	cluster, err := eks.NewCluster(ctx, name, RenderCluster(args, clusterRole.Arn), parent, pulumi.DependsOn(clusterAttached),
		pulumi.Protect(args.Protect))
	if err != nil {
		return nil, fmt.Errorf("eks %q: cluster %q: %w", name, name, err)
	}
	c.Cluster = cluster
	if c.VPCCNI, err = eks.NewAddon(ctx, name+"-vpc-cni", RenderVPCCNI(cluster.Name), parent); err != nil {
		return nil, fmt.Errorf("eks %q: add-on %q: %w", name, name+"-vpc-cni", err)
	}
	nodeDeps := append(append([]pulumi.Resource{}, nodeAttached...), c.VPCCNI)
	clusterSG := cluster.VpcConfig.ClusterSecurityGroupId().Elem()
	for _, p := range args.Pools {
		lt, err := c.newPoolFabric(ctx, name, args, p, clusterSG, parent)
		if err != nil {
			return nil, err
		}
		if p.Karpenter {
			continue // no node group: Karpenter's NodePool (karpenter.go)
		}
		ng, err := eks.NewNodeGroup(ctx, name+"-"+p.Name, RenderNodeGroup(args, p, cluster.Name, nodeRole.Arn, lt), parent,
			pulumi.DependsOn(nodeDeps),
			pulumi.Timeouts(NodeGroupTimeouts),
			// A generated name lets the new group exist beside the old: a GPU group keeps its
			// GPUs until its replacement has nodes, and a stockout fails the creation, not the group.
			pulumi.DeleteBeforeReplace(p.DeleteFirst || p.CloudName != ""),
			// A cluster autoscaler, if installed, owns the desired size once the group exists.
			pulumi.IgnoreChanges([]string{"scalingConfig.desiredSize"}))
		if err != nil {
			return nil, fmt.Errorf("eks %q: node group %q: %w", name, name+"-"+p.Name, err)
		}
		c.NodeGroups = append(c.NodeGroups, ng)
	}
	var groups []pulumi.Resource
	for _, ng := range c.NodeGroups {
		groups = append(groups, ng)
	}
	c.PodIdentity, err = eks.NewAddon(ctx, name+"-pod-identity", &eks.AddonArgs{
		ClusterName: cluster.Name,
		AddonName:   pulumi.String(PodIdentityAddon),
	}, parent, pulumi.DependsOn(groups))
	if err != nil {
		return nil, fmt.Errorf("eks %q: add-on %q: %w", name, name+"-pod-identity", err)
	}
	if KarpenterPools(args.Pools) {
		if c.Karpenter, err = newKarpenterAWS(ctx, name, args, cluster, parent); err != nil {
			return nil, fmt.Errorf("eks %q: %w", name, err)
		}
	}
	if args.BlockStorage {
		if err := c.newEBSCSI(ctx, name, args.Name, append(groups, c.PodIdentity)); err != nil {
			return nil, fmt.Errorf("eks %q: %w", name, err)
		}
	}

	c.ClusterName = cluster.Name
	c.Endpoint = cluster.Endpoint
	c.NodeSecurityGroupID = cluster.VpcConfig.ClusterSecurityGroupId().Elem()
	region := args.Region
	c.Kubeconfig = pulumi.ToSecret(pulumi.All(cluster.Name, cluster.Endpoint, cluster.CertificateAuthority.Data()).ApplyT(
		func(v []any) string {
			ca, _ := v[2].(*string)
			data := ""
			if ca != nil {
				data = *ca
			}
			return Kubeconfig(v[0].(string), region, v[1].(string), data)
		})).(pulumi.StringOutput)
	return c, meta.RegisterOutputs(ctx, c, pulumi.Map{
		"clusterName": c.ClusterName, "endpoint": c.Endpoint, "kubeconfig": c.Kubeconfig, "nodeSecurityGroupId": c.NodeSecurityGroupID,
	})
}

// RenderVPCCNI builds the managed VPC CNI add-on with its network policy agent on. It takes over
// the copy EKS installs by itself (OVERWRITE: that copy has no settings worth keeping).
func RenderVPCCNI(cluster pulumi.StringInput) *eks.AddonArgs {
	return &eks.AddonArgs{
		ClusterName:              cluster,
		AddonName:                pulumi.String(VPCCNIAddon),
		ConfigurationValues:      pulumi.String(VPCCNIConfiguration),
		ResolveConflictsOnCreate: pulumi.String("OVERWRITE"),
		ResolveConflictsOnUpdate: pulumi.String("OVERWRITE"),
	}
}

// RenderCluster builds the cluster: API authentication (the identity that runs `pulumi up`
// becomes cluster admin), a private endpoint for the nodes always, a public one (restricted to
// the authorized networks) unless asked not to, control-plane logs for audits.
func RenderCluster(a *ClusterArgs, roleArn pulumi.StringInput) *eks.ClusterArgs {
	vpc := &eks.ClusterVpcConfigArgs{
		SubnetIds:             pulumi.StringArray(a.SubnetIDs),
		EndpointPrivateAccess: pulumi.Bool(true),
		EndpointPublicAccess:  pulumi.Bool(!a.PrivateEndpoint),
	}
	if len(a.AuthorizedNetworks) > 0 && !a.PrivateEndpoint {
		vpc.PublicAccessCidrs = pulumi.ToStringArray(a.AuthorizedNetworks)
	}
	ca := &eks.ClusterArgs{
		Name:      pulumi.String(a.Name),
		RoleArn:   roleArn,
		VpcConfig: vpc,
		AccessConfig: &eks.ClusterAccessConfigArgs{
			AuthenticationMode:                      pulumi.String("API_AND_CONFIG_MAP"),
			BootstrapClusterCreatorAdminPermissions: pulumi.Bool(true),
		},
		EnabledClusterLogTypes: pulumi.StringArray{pulumi.String("api"), pulumi.String("audit"), pulumi.String("authenticator")},
	}
	if a.KubernetesVersion != "" {
		ca.Version = pulumi.String(a.KubernetesVersion)
	}
	return ca
}

// RenderNodeGroup builds one managed node group; lt is its launch template (fabric.go), nil for
// EKS's own. A compact group runs in its one subnet.
func RenderNodeGroup(a *ClusterArgs, p Pool, cluster, nodeRoleArn pulumi.StringInput, lt *ec2.LaunchTemplate) *eks.NodeGroupArgs {
	ami, capacity := CPUAMI, "ON_DEMAND"
	if p.GPUs > 0 {
		ami = GPUAMI
	}
	if p.Spot {
		capacity = "SPOT"
	}
	ng := &eks.NodeGroupArgs{
		ClusterName:   cluster,
		NodeRoleArn:   nodeRoleArn,
		SubnetIds:     pulumi.StringArray(poolSubnets(a, p)),
		AmiType:       pulumi.String(ami),
		CapacityType:  pulumi.String(capacity),
		InstanceTypes: pulumi.StringArray{pulumi.String(p.InstanceType)},
		DiskSize:      pulumi.Int(nodeDiskGiB),
		ScalingConfig: &eks.NodeGroupScalingConfigArgs{
			DesiredSize: pulumi.Int(p.Nodes),
			MinSize:     pulumi.Int(p.MinNodes),
			MaxSize:     pulumi.Int(p.MaxNodes),
		},
		// One node at a time: a surge node of an 8-GPU instance needs quota nobody has.
		UpdateConfig: &eks.NodeGroupUpdateConfigArgs{MaxUnavailable: pulumi.Int(1)},
		Labels:       pulumi.ToStringMap(p.Labels),
	}
	if p.CloudName != "" {
		ng.NodeGroupName = pulumi.String(p.CloudName)
	} else {
		ng.NodeGroupNamePrefix = pulumi.String(NamePrefix(p.Name))
	}
	if lt != nil {
		// EKS refuses a disk size beside a launch template: the template has the root volume.
		ng.DiskSize = nil
		ng.LaunchTemplate = &eks.NodeGroupLaunchTemplateArgs{Id: lt.ID(), Version: lt.LatestVersion.ApplyT(func(v int) string { return fmt.Sprint(v) }).(pulumi.StringOutput)}
	}
	var taints eks.NodeGroupTaintArray
	for _, t := range p.Taints {
		taints = append(taints, eks.NodeGroupTaintArgs{Key: pulumi.String(t.Key), Value: pulumi.String(t.Value), Effect: pulumi.String(kubeaccess.TaintEffect(t.Effect))})
	}
	if len(taints) > 0 {
		ng.Taints = taints
	}
	if a.KubernetesVersion != "" {
		ng.Version = pulumi.String(a.KubernetesVersion)
	}
	return ng
}

// NodeGroupNameMax is EKS's limit on node group names (characters).
const NodeGroupNameMax = 63

// NamePrefix is the nodeGroupNamePrefix of a pool without a CloudName: the provider appends a
// unique suffix of kubeaccess.UniqueSuffixLen characters to it, within NodeGroupNameMax.
func NamePrefix(pool string) string { return kubeaccess.NamePrefix(pool, NodeGroupNameMax) }

// newRole registers an IAM role with its trust policy and managed policies attached.
func newRole(ctx *pulumi.Context, name, roleName, trust string, policies []string, opts ...pulumi.ResourceOption) (*iam.Role, []pulumi.Resource, error) {
	role, err := iam.NewRole(ctx, name, &iam.RoleArgs{
		Name:             pulumi.String(roleName),
		AssumeRolePolicy: pulumi.String(trust),
	}, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("IAM role %q: %w", name, err)
	}
	attached := []pulumi.Resource{role}
	for _, arn := range policies {
		att, err := iam.NewRolePolicyAttachment(ctx, name+"-"+policyName(arn), &iam.RolePolicyAttachmentArgs{
			Role: role.Name, PolicyArn: pulumi.String(arn),
		}, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("IAM role policy attachment %q: %w", name+"-"+policyName(arn), err)
		}
		attached = append(attached, att)
	}
	return role, attached, nil
}

// TrustPolicy is the policy that lets a service principal assume a role.
func TrustPolicy(service string, actions ...string) string {
	b, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect":    "Allow",
			"Principal": map[string]string{"Service": service},
			"Action":    actions,
		}},
	})
	return string(b)
}

func policyName(arn string) string { return strings.ToLower(arn[strings.LastIndex(arn, "/")+1:]) }

// Kubeconfig is a kubeconfig for the cluster: its endpoint and CA, credentials from
// `aws eks get-token` (so no token is ever stored in it).
func Kubeconfig(cluster, region, endpoint, caData string) string {
	return kubeaccess.ExecKubeconfig(cluster, endpoint, caData,
		"command: aws",
		fmt.Sprintf("args: [eks, get-token, --cluster-name, %s, --region, %s, --output, json]", cluster, region))
}
