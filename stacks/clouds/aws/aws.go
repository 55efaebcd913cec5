// Package aws is the entry of cloud aws (kolotoc:cloud: aws): an EKS cluster with its VPC (or
// an existing one), managed node groups and an EFS file system, made by components/cloud/eks. It
// registers itself with the stack (stacks.RegisterCloud); importing kolotoc/stacks/clouds
// registers it.
package aws

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/eks"
	"kolotoc/components/cluster"
	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
	"kolotoc/stacks"
)

func init() { stacks.RegisterCloud(entry) }

var entry = &stacks.Cloud{
	Name:    stacks.CloudAWS,
	Creates: true,

	Catalogue: catalogue(),
	SpotLabel: "eks.amazonaws.com/capacityType",
	// "A Spot Instance interruption notice is a warning that is issued two minutes before Amazon
	// EC2 stops or terminates your Spot Instance."
	SpotNotice: &meta.SpotNotice{Seconds: 120, What: "EC2 Spot's interruption notice",
		Doc: "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html"},
	Fabric:      poolFabric,
	SpreadZones: spreadZones,
	// The zones the local cluster's Karpenter offers AWS's instance types in (stacks' autoscale.go).
	KarpenterZones: []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-west-2a", "us-west-2b"},

	DevicePlugins:    []string{stacks.DevicePluginKolotoc},
	DevicePluginsWhy: "the EKS AL2023 NVIDIA AMI runs no device plugin and Kolotoc creates the cluster, so no GPU Operator is there before it",
	// The in-tree controller's load balancer (a Classic ELB unless told nlb); an existing EKS
	// cluster is taken as passing client addresses through (docs/operating/security.md, "The
	// entrypoint from outside").
	LoadBalancer: entrypoint.LoadBalancerAWSInTree,

	Store:    store,
	Defaults: applyDefaults,
	Check:    check,
	Deploy:   deploy,
}

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultVPCCIDR: the created AWS VPC; a /16 leaves a /20 (4096 addresses) per zone for the
	// VPC CNI, which gives every pod an address of the subnet.
	DefaultVPCCIDR = "10.0.0.0/16"
	// defaultAWSZones: EKS needs subnets in at least two availability zones.
	defaultAWSZones = 2
	// Limits on names that derive from cluster.name (characters).
	eksRoleSuffixMax = 8  // "-efs-csi": the longest suffix of the IAM roles named <cluster>-<role>
	iamRoleNameMax   = 64 // AWS IAM role names
)

// eksPoolName: a pinned cloudName as EKS takes it: letters, digits, '-' and '_', starting with a
// letter or digit, at most 63 (CreateNodegroup's nodegroupName).
var eksPoolName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,62}$`)

// applyDefaults fills the created VPC's range. Zero values only.
func applyDefaults(c *stacks.Config) {
	k := &c.Cluster
	if k.VPCCIDR == "" && k.VPCID == "" {
		k.VPCCIDR = DefaultVPCCIDR
	}
}

// check checks aws's keys on an aws stack: the names EKS derives from cluster.name, the network,
// the pools' zones and cloud names, who reaches the API server.
func check(c *stacks.Config, v *stacks.Validator) {
	if c.Cloud != stacks.CloudAWS {
		return
	}
	name := c.Cluster.Name
	if max := iamRoleNameMax - eksRoleSuffixMax; len(name) > max {
		v.Add("cluster.name", name, fmt.Sprintf("at most %d characters on aws: the IAM roles are named <cluster.name>-efs-csi and the like (%d characters allowed)", max, iamRoleNameMax))
	}
	validateNetwork(c, v)
	for i, p := range c.NodePools {
		key := fmt.Sprintf("nodePools[%d]", i)
		if len(p.Zones) > 0 && p.Placement != stacks.PlacementCompact {
			v.Add(key+".zones", strings.Join(p.Zones, ","), fmt.Sprintf("on aws a spread pool spans the cluster's subnets (set cluster.zones instead); "+
				"only a compact pool names its one zone (nodePools[%d].placement: %s)", i, stacks.PlacementCompact))
		}
		if p.Placement == stacks.PlacementCompact && len(p.Zones) == 1 && len(c.Cluster.Zones) > 0 && !slices.Contains(c.Cluster.Zones, p.Zones[0]) {
			v.Add(key+".zones[0]", p.Zones[0], "a compact EKS pool runs in one of the cluster's zones; allowed: "+strings.Join(c.Cluster.Zones, ", "))
		}
		if p.Placement == stacks.PlacementCompact && len(p.Zones) == 1 && c.Cluster.VPCID != "" {
			v.Add(key+".zones", p.Zones[0], "with cluster.vpcId a compact pool runs in the first of cluster.subnetIds; list that subnet first instead")
		}
		if p.CloudName != "" && !eksPoolName.MatchString(p.CloudName) {
			v.Add(key+".cloudName", p.CloudName, "not an EKS node group name; allowed: 1-63 letters, digits, '-' and '_', starting with a letter or digit")
		}
	}
	checkKarpenterPools(c, v)
	stacks.CheckPrivateEndpoint(c, v)
}

func validateNetwork(c *stacks.Config, v *stacks.Validator) {
	k := c.Cluster
	switch {
	case k.VPCID != "" && len(k.SubnetIDs) == 0:
		v.Add("cluster.subnetIds", "[]", "required with cluster.vpcId: the existing subnets (in at least 2 zones) for the cluster, nodes and EFS")
	case k.VPCID == "" && len(k.SubnetIDs) > 0:
		v.Add("cluster.vpcId", "(unset)", "required with cluster.subnetIds: the VPC those subnets are in (the EFS security group lives there)")
	case len(k.SubnetIDs) == 1:
		v.Add("cluster.subnetIds", strings.Join(k.SubnetIDs, ","), "EKS needs subnets in at least 2 availability zones")
	}
	if k.VPCID != "" && len(k.Zones) > 0 {
		v.Add("cluster.zones", strings.Join(k.Zones, ","), "only for a created VPC; with cluster.vpcId the subnets' zones are used")
	}
	if len(k.Zones) == 1 {
		v.Add("cluster.zones", k.Zones[0], "EKS needs at least 2 availability zones")
	}
	for i, z := range k.Zones {
		if k.Region != "" && !strings.HasPrefix(z, k.Region) {
			v.Add(fmt.Sprintf("cluster.zones[%d]", i), z, fmt.Sprintf("not a zone of region %s; allowed: %sa, %sb, …", k.Region, k.Region, k.Region))
		}
	}
	if k.VPCID == "" {
		_, n, err := net.ParseCIDR(k.VPCCIDR)
		ones, bits := 0, 0
		if err == nil {
			ones, bits = n.Mask.Size()
		}
		if err != nil || bits != 32 || ones < 16 || ones > 20 {
			v.Add("cluster.vpcCidr", k.VPCCIDR, "allowed: an IPv4 CIDR from /16 to /20, such as 10.0.0.0/16 (each zone gets a sixteenth of it)")
		}
	}
}

// poolFabric: a compact pool runs in a cluster placement group, in its zone or the cluster's
// first; a GPU pool's nodes get the EFA interfaces their instance type has, and the huge pages
// libfabric's EFA provider uses, which the pods request beside them (fabric.NodeHugePagesMi);
// except on a pool at zero: Karpenter launches a node only for resources its instance type has,
// and huge pages are none of them (kubernetes-sigs/karpenter#751), so a pod requesting them would
// wait for ever.
func poolFabric(c *stacks.Config, p stacks.NodePool, m stacks.MachineType, f *stacks.PoolFabric) {
	if f.Compact {
		if f.Zone == "" && len(c.Cluster.Zones) > 0 {
			f.Zone = c.Cluster.Zones[0]
		}
		f.PlacementGroup = true
	}
	if stacks.FabricOn(p) {
		f.EFAs, f.RDMA = m.EFAs, m.EFARDMA
		f.HugePages = m.EFAs > 0 && !karpenterPool(p)
	}
}

// spreadZones: a spread pool spans the cluster's subnets, one zone each as EKS requires of them
// (at least two).
func spreadZones(c *stacks.Config, _ stacks.NodePool) int {
	return max(len(c.Cluster.Zones), len(c.Cluster.SubnetIDs), defaultAWSZones)
}

func deploy(ctx *pulumi.Context, c *stacks.Config) (pulumi.StringOutput, []pulumi.Resource, *stacks.CloudResult, error) {
	k := c.Cluster
	prov, err := eks.NewProvider(ctx, "aws", k.Region, stacks.CloudLabels(c))
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	onAWS := pulumi.Provider(prov)
	track := &meta.Tracker{} // what the workloads wait for: every resource of the cluster and the store

	var subnets []pulumi.StringInput
	var vpcID pulumi.StringInput
	var zones []string // the created subnets' zones, in subnet order; none with an existing VPC
	if k.VPCID != "" {
		vpcID = pulumi.String(k.VPCID)
		for _, id := range k.SubnetIDs {
			subnets = append(subnets, pulumi.String(id))
		}
	} else {
		zones = k.Zones
		if len(zones) == 0 {
			if zones, err = eks.DefaultZones(ctx, defaultAWSZones, pulumi.Provider(prov)); err != nil {
				return pulumi.StringOutput{}, nil, nil, fmt.Errorf("%s:cluster.zones: %w", stacks.ConfigNamespace, err)
			}
		}
		net, err := eks.NewNetwork(ctx, stacks.CloudNetworkName, &eks.NetworkArgs{
			Name: k.Name, CIDR: k.VPCCIDR, Zones: zones, ClusterName: k.Name,
		}, onAWS)
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		vpcID, subnets = net.VPCID, net.PrivateSubnetIDs
	}

	pools := make([]eks.Pool, len(c.NodePools))
	for i, p := range c.NodePools {
		f := c.PoolFabric(p)
		pools[i] = eks.Pool{
			Name: p.Name, InstanceType: p.MachineType, Nodes: p.Nodes, MinNodes: p.Min(), MaxNodes: p.MaxNodes,
			GPUs: p.GPUsPerNode, Spot: p.Spot, Labels: c.CloudNodeLabels(p), Taints: cluster.NodeTaints(c.SimulatedPool(p)),
			// A compact group runs in its zone's subnet: the first zone's unless the pool names
			// one; with an existing VPC, the first of cluster.subnetIds.
			Compact: f.Compact, Subnet: max(slices.Index(zones, f.Zone), 0), EFAs: f.EFAs,
			CloudName: p.CloudName, DeleteFirst: p.Replace == stacks.ReplaceDeleteFirst,
			// A pool at zero is Karpenter's (karpenter.go): no node group.
			Karpenter: karpenterPool(p), ScaleDownAfter: p.ScaleDownAfter,
		}
	}
	clusterArgs := &eks.ClusterArgs{
		Name: k.Name, Region: k.Region, KubernetesVersion: k.KubernetesVersion, SubnetIDs: subnets, VPCID: vpcID, Pools: pools,
		AuthorizedNetworks: k.AuthorizedNetworks, PrivateEndpoint: k.PrivateEndpoint, Protect: k.Protect,
		// etcd's members claim block volumes; EKS installs no driver for them.
		BlockStorage: c.Etcd.Enabled,
	}
	cl, err := eks.NewCluster(ctx, stacks.CloudClusterName, clusterArgs, onAWS, track.Option())
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	res := &stacks.CloudResult{Outputs: pulumi.Map{}, Kube: kubeAccess(c)}
	if cl.Karpenter != nil {
		res.InCluster = karpenter(c, cl, clusterArgs, zones)
	}
	if s := c.Storage; c.CloudStore() { // an EFS file system, made or existing (efs.go)
		nodes := []pulumi.Resource{cl.PodIdentity}
		for _, ng := range cl.NodeGroups {
			nodes = append(nodes, ng)
		}
		fs, err := eks.NewEFS(ctx, stacks.CloudStoreName, &eks.EFSArgs{
			Name: k.Name + "-efs", ClusterName: cl.ClusterName, VPCID: vpcID, SubnetIDs: subnets,
			NodeSecurityGroupID: cl.NodeSecurityGroupID, ThroughputMode: s.Tier, Protect: s.Protect, DependsOn: nodes,
			PerformanceMode: s.PerformanceMode, ProvisionedMibps: s.ThroughputMibps,
			FileSystemID: s.FileSystemID, // an existing one: only its CSI driver is installed (mountExisting mounts it)
			Backup:       s.Backup.Enabled,
		}, onAWS, track.Option())
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		res.Outputs["efsFileSystemId"] = fs.FileSystemID
		if s.FileSystemID != "" {
			return cl.Kubeconfig, track.Resources(), res, nil
		}
		res.Store = &stacks.CloudVolume{
			// tls: efs-utils encrypts NFS in transit.
			MountOptions: []string{"tls"},
			CSI: &storage.CSI{
				Driver: storage.EFSDriver, VolumeHandle: fs.FileSystemID,
				// Further claims of this class get an access point (a directory) of their own.
				ClassParameters: pulumi.StringMap{
					"provisioningMode": pulumi.String("efs-ap"), "fileSystemId": fs.FileSystemID, "directoryPerms": pulumi.String("700"),
				},
			},
		}
	}
	return cl.Kubeconfig, track.Resources(), res, nil
}

// kubeAccess: the aws CLI fetches the credentials into the user's kubeconfig under the alias
// cluster.context, or cluster.name.
func kubeAccess(c *stacks.Config) stacks.KubeAccess {
	k := c.Cluster
	alias := k.Context
	meta.Fill(&alias, k.Name)
	return stacks.KubeAccess{
		Context: pulumi.String(alias).ToStringOutput(),
		KubeconfigCommand: pulumi.String(fmt.Sprintf("aws eks update-kubeconfig --name %s --region %s --alias %s",
			k.Name, k.Region, stacks.ShellQuote(alias))).ToStringOutput(),
	}
}
