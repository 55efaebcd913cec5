package eks

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta/rendertest"
)

const (
	tCluster   = "aws:eks/cluster:Cluster"
	tNodeGroup = "aws:eks/nodeGroup:NodeGroup"
	tAddon     = "aws:eks/addon:Addon"
	tTemplate  = "aws:ec2/launchTemplate:LaunchTemplate"
	tPlacement = "aws:ec2/placementGroup:PlacementGroup"
	tSG        = "aws:ec2/securityGroup:SecurityGroup"
	tFS        = "aws:efs/fileSystem:FileSystem"
	tBackup    = "aws:efs/backupPolicy:BackupPolicy"
	tMount     = "aws:efs/mountTarget:MountTarget"
	tSubnet    = "aws:ec2/subnet:Subnet"
)

type nodeGroup struct {
	Name          string            `json:"nodeGroupName"`
	NamePrefix    string            `json:"nodeGroupNamePrefix"`
	AmiType       string            `json:"amiType"`
	CapacityType  string            `json:"capacityType"`
	InstanceTypes []string          `json:"instanceTypes"`
	DiskSize      *int              `json:"diskSize"`
	SubnetIDs     []string          `json:"subnetIds"`
	Labels        map[string]string `json:"labels"`
	Taints        []Taint           `json:"taints"`
	Scaling       struct {
		Desired int `json:"desiredSize"`
		Min     int `json:"minSize"`
		Max     int `json:"maxSize"`
	} `json:"scalingConfig"`
	Update struct {
		MaxUnavailable int `json:"maxUnavailable"`
	} `json:"updateConfig"`
	LaunchTemplate *struct {
		ID string `json:"id"`
	} `json:"launchTemplate"`
}

func testArgs() *ClusterArgs {
	return &ClusterArgs{
		Name: "kolotoc-aws", Region: "eu-west-1", Protect: true, BlockStorage: true,
		SubnetIDs: []pulumi.StringInput{pulumi.String("subnet-a"), pulumi.String("subnet-b")}, VPCID: pulumi.String("vpc-1"),
		Pools: []Pool{
			{Name: "gpu", InstanceType: "p4d.24xlarge", Nodes: 2, MinNodes: 1, MaxNodes: 4, GPUs: 8, Spot: true,
				Labels: map[string]string{"kolotoc.dev/pool": "gpu"}, Taints: []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}},
				Compact: true, Subnet: 1, EFAs: 4},
			{Name: "cpu", CloudName: "cpu-pinned", DeleteFirst: true, InstanceType: "m6i.4xlarge", Nodes: 2, MinNodes: 2, MaxNodes: 2,
				Labels: map[string]string{"kolotoc.dev/pool": "cpu"}},
		},
	}
}

func renderCluster(t *testing.T, a *ClusterArgs) (*rendertest.Recorder, bool) {
	t.Helper()
	var secret bool
	rec := rendertest.Run(t, func(ctx *pulumi.Context) error {
		c, err := NewCluster(ctx, "cluster", a)
		if err != nil {
			return err
		}
		secret = pulumi.IsSecret(c.Kubeconfig)
		return nil
	})
	return rec, secret
}

// TestGPUNodeGroup: the NVIDIA AMI, Spot capacity, the GPU taint as EKS spells it, the scaling
// bounds, one node at a time, and the compact group's one subnet and launch template.
func TestGPUNodeGroup(t *testing.T) {
	rec, _ := renderCluster(t, testArgs())
	r := rec.One(t, tNodeGroup, "cluster-gpu")
	ng := rendertest.DecodeSome[nodeGroup](t, r)
	if ng.AmiType != "AL2023_x86_64_NVIDIA" || ng.CapacityType != "SPOT" || !cmp.Equal(ng.InstanceTypes, []string{"p4d.24xlarge"}) {
		t.Errorf("AMI %s capacity %s instances %v: want the NVIDIA AMI on Spot p4d.24xlarge", ng.AmiType, ng.CapacityType, ng.InstanceTypes)
	}
	if d := cmp.Diff([]Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NO_SCHEDULE"}}, ng.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if ng.Scaling.Desired != 2 || ng.Scaling.Min != 1 || ng.Scaling.Max != 4 || ng.Update.MaxUnavailable != 1 {
		t.Errorf("scaling %+v update %+v: want 1..4 from 2, one node at a time", ng.Scaling, ng.Update)
	}
	if ng.Labels["kolotoc.dev/pool"] != "gpu" || !strings.HasPrefix(ng.NamePrefix, "gpu-") || ng.Name != "" {
		t.Errorf("labels %v name %q prefix %q", ng.Labels, ng.Name, ng.NamePrefix)
	}
	if !cmp.Equal(ng.SubnetIDs, []string{"subnet-b"}) {
		t.Errorf("subnets %v: a compact group runs in its one subnet", ng.SubnetIDs)
	}
	if ng.LaunchTemplate == nil || ng.DiskSize != nil {
		t.Errorf("launch template %+v, disk size %v: EKS refuses a disk size beside a template", ng.LaunchTemplate, val(ng.DiskSize))
	}
	if !cmp.Equal(r.IgnoreChanges, []string{"scalingConfig.desiredSize"}) || r.DeleteBeforeReplace || r.CreateTimeout != "90m" || r.Protect {
		t.Errorf("options: ignore %v, deleteBeforeReplace %v, timeout %q, protect %v", r.IgnoreChanges, r.DeleteBeforeReplace, r.CreateTimeout, r.Protect)
	}
	if !slices.Contains(r.DependsOn, "cluster-vpc-cni") {
		t.Errorf("depends on %v: nodes would run pods before the network policy agent", r.DependsOn)
	}
}

// TestFabric: the EFA pool's template puts every interface in the placement group, the first on
// the cluster's security group as well as the EFA one.
func TestFabric(t *testing.T) {
	rec, _ := renderCluster(t, testArgs())
	lt := rendertest.DecodeSome[struct {
		Placement struct {
			Group string `json:"groupName"`
		} `json:"placement"`
		NICs []struct {
			Device int      `json:"deviceIndex"`
			Card   int      `json:"networkCardIndex"`
			Type   string   `json:"interfaceType"`
			SGs    []string `json:"securityGroups"`
		} `json:"networkInterfaces"`
		Disks []struct {
			EBS struct {
				Size      int    `json:"volumeSize"`
				Encrypted string `json:"encrypted"`
			} `json:"ebs"`
		} `json:"blockDeviceMappings"`
	}](t, rec.One(t, tTemplate, "cluster-gpu"))
	if lt.Placement.Group != "kolotoc-aws-gpu" {
		t.Errorf("placement group %q", lt.Placement.Group)
	}
	if len(lt.NICs) != 4 {
		t.Fatalf("%d interfaces, want 4 EFAs", len(lt.NICs))
	}
	for i, n := range lt.NICs {
		if n.Card != i || n.Type != "efa" || (i == 0) != (n.Device == 0) || (i == 0) != (len(n.SGs) == 2) {
			t.Errorf("interface %d: %+v", i, n)
		}
	}
	if len(lt.Disks) != 1 || lt.Disks[0].EBS.Size != 100 || lt.Disks[0].EBS.Encrypted != "true" {
		t.Errorf("root volume %+v: want 100 GiB encrypted", lt.Disks)
	}
	if len(rec.OfType(tPlacement)) != 1 || len(rec.OfType(tTemplate)) != 1 {
		t.Error("a placement group or template for the plain CPU pool")
	}
	sg := rendertest.DecodeSome[struct {
		Ingress []struct {
			Protocol string   `json:"protocol"`
			Self     bool     `json:"self"`
			CIDRs    []string `json:"cidrBlocks"`
		} `json:"ingress"`
	}](t, rec.One(t, tSG, "cluster-efa"))
	if len(sg.Ingress) != 1 || !sg.Ingress[0].Self || sg.Ingress[0].Protocol != "-1" || len(sg.Ingress[0].CIDRs) != 0 {
		t.Errorf("EFA security group ingress %+v: want everything from the group itself, nothing else", sg.Ingress)
	}
}

// TestFixedNodeGroup: a pinned name is replaced delete-first; a CPU group runs EKS's own template.
func TestFixedNodeGroup(t *testing.T) {
	rec, _ := renderCluster(t, testArgs())
	r := rec.One(t, tNodeGroup, "cluster-cpu")
	ng := rendertest.DecodeSome[nodeGroup](t, r)
	if ng.Name != "cpu-pinned" || !r.DeleteBeforeReplace || ng.AmiType != "AL2023_x86_64_STANDARD" || ng.CapacityType != "ON_DEMAND" {
		t.Errorf("%+v, deleteBeforeReplace %v", ng, r.DeleteBeforeReplace)
	}
	if ng.DiskSize == nil || *ng.DiskSize != 100 || ng.LaunchTemplate != nil || len(ng.Taints) != 0 || len(ng.SubnetIDs) != 2 {
		t.Errorf("disk %v template %+v taints %v subnets %v", val(ng.DiskSize), ng.LaunchTemplate, ng.Taints, ng.SubnetIDs)
	}
}

// TestClusterAccess: protect, a secret kubeconfig, NetworkPolicy enforced, the EBS driver for
// block volumes, a public endpoint restricted to the authorized networks.
func TestClusterAccess(t *testing.T) {
	a := testArgs()
	a.AuthorizedNetworks = []string{"203.0.113.0/24"}
	rec, secret := renderCluster(t, a)
	if !secret {
		t.Error("the kubeconfig output is not a secret")
	}
	r := rec.One(t, tCluster, "cluster")
	cl := rendertest.DecodeSome[struct {
		VPC struct {
			Private bool     `json:"endpointPrivateAccess"`
			Public  bool     `json:"endpointPublicAccess"`
			CIDRs   []string `json:"publicAccessCidrs"`
		} `json:"vpcConfig"`
	}](t, r)
	if !r.Protect || !cl.VPC.Private || !cl.VPC.Public || !cmp.Equal(cl.VPC.CIDRs, []string{"203.0.113.0/24"}) {
		t.Errorf("protect %v, endpoint %+v", r.Protect, cl.VPC)
	}
	addons := map[string]string{}
	for _, ad := range rec.OfType(tAddon) {
		in := rendertest.DecodeSome[struct {
			Name   string `json:"addonName"`
			Config string `json:"configurationValues"`
		}](t, ad)
		addons[in.Name] = in.Config
	}
	if addons["vpc-cni"] != `{"enableNetworkPolicy":"true"}` {
		t.Errorf("vpc-cni configuration %q: NetworkPolicy would not be enforced", addons["vpc-cni"])
	}
	for _, want := range []string{"eks-pod-identity-agent", "aws-ebs-csi-driver"} {
		if _, ok := addons[want]; !ok {
			t.Errorf("no %s add-on among %v", want, addons)
		}
	}

	a.PrivateEndpoint = true
	rec, _ = renderCluster(t, a)
	vpc := rendertest.Get(rendertest.Inputs(rec.One(t, tCluster, "cluster")), "vpcConfig")
	if rendertest.Get(vpc, "endpointPublicAccess") != false || rendertest.Get(vpc, "publicAccessCidrs") != nil {
		t.Errorf("private endpoint: %v", vpc)
	}
}

// TestEFS: NFS from the nodes' security group alone, the file system encrypted, protected and
// backed up, a mount target per subnet.
func TestEFS(t *testing.T) {
	rec := rendertest.Render(t, "shared-store", &EFSArgs{
		Name: "kolotoc-aws-efs", ClusterName: pulumi.String("kolotoc-aws"), VPCID: pulumi.String("vpc-1"),
		SubnetIDs:           []pulumi.StringInput{pulumi.String("subnet-a"), pulumi.String("subnet-b")},
		NodeSecurityGroupID: pulumi.String("sg-nodes"), ThroughputMode: "elastic", Protect: true, Backup: true,
	}, NewEFS)
	sg := rendertest.DecodeSome[struct {
		Ingress []struct {
			Protocol string   `json:"protocol"`
			From     int      `json:"fromPort"`
			To       int      `json:"toPort"`
			SGs      []string `json:"securityGroups"`
			CIDRs    []string `json:"cidrBlocks"`
		} `json:"ingress"`
	}](t, rec.One(t, tSG, "shared-store"))
	if len(sg.Ingress) != 1 || sg.Ingress[0].From != 2049 || sg.Ingress[0].To != 2049 || sg.Ingress[0].Protocol != "tcp" ||
		!cmp.Equal(sg.Ingress[0].SGs, []string{"sg-nodes"}) || len(sg.Ingress[0].CIDRs) != 0 {
		t.Errorf("ingress %+v: want TCP 2049 from the nodes' group only", sg.Ingress)
	}
	fs := rec.One(t, tFS, "shared-store")
	if !fs.Protect || rendertest.Get(rendertest.Inputs(fs), "encrypted") != true {
		t.Errorf("file system protect %v, inputs %v", fs.Protect, rendertest.Inputs(fs))
	}
	if rendertest.Get(rendertest.Inputs(rec.One(t, tBackup, "shared-store")), "backupPolicy", "status") != "ENABLED" {
		t.Error("backups not enabled")
	}
	if n := len(rec.OfType(tMount)); n != 2 {
		t.Errorf("%d mount targets, want one per subnet", n)
	}
}

// TestNetwork: a private and a public subnet per zone, carved from the VPC's range without
// overlap, tagged for the load balancers.
func TestNetwork(t *testing.T) {
	rec := rendertest.Render(t, "network", &NetworkArgs{Name: "kolotoc-aws", CIDR: "10.0.0.0/16", Zones: []string{"eu-west-1a", "eu-west-1b"}, ClusterName: "kolotoc-aws"}, NewNetwork)
	got := map[string]string{}
	for _, s := range rec.OfType(tSubnet) {
		in := rendertest.DecodeSome[struct {
			CIDR string            `json:"cidrBlock"`
			Tags map[string]string `json:"tags"`
		}](t, s)
		got[s.Name] = in.CIDR
		role := "kubernetes.io/role/internal-elb"
		if strings.Contains(s.Name, "public") {
			role = "kubernetes.io/role/elb"
		}
		if in.Tags[role] != "1" || in.Tags["kubernetes.io/cluster/kolotoc-aws"] != "shared" {
			t.Errorf("%s tags %v", s.Name, in.Tags)
		}
	}
	want := map[string]string{
		"network-private-eu-west-1a": "10.0.0.0/20", "network-private-eu-west-1b": "10.0.16.0/20",
		"network-public-eu-west-1a": "10.0.240.0/24", "network-public-eu-west-1b": "10.0.241.0/24",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("subnets (-want +got):\n%s", d)
	}
}

// val prints an optional number: its value, or "unset".
func val[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}
