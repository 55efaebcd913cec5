package eks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// privateSubnetBits: each zone's private subnet (nodes, pods, EFS mount targets) is a
	// sixteenth of the VPC: a /20 of a /16, 4096 addresses, as the VPC CNI gives every pod one.
	privateSubnetBits = 4
	// publicSubnetBits, publicSubnetBase: each zone's public subnet (the NAT gateway, load
	// balancers) is a /24 of a /16, taken from the top of the VPC, clear of the private ones.
	publicSubnetBits = 8
	publicSubnetBase = 240
)

// NetworkArgs are the inputs of a created VPC.
type NetworkArgs struct {
	Name        string   // prefix of every Name tag
	CIDR        string   // the VPC's IPv4 CIDR, /16 to /20
	Zones       []string // availability zones, one private and one public subnet each
	ClusterName string   // EKS cluster the subnets are tagged for (load balancer discovery)
}

// Network is a VPC with a public and a private subnet per zone. Nodes run in the private subnets
// and reach the internet (image pulls) through one NAT gateway; nothing reaches them from outside.
type Network struct {
	pulumi.ResourceState
	VPCID            pulumi.StringOutput
	PrivateSubnetIDs []pulumi.StringInput // one per zone, in zone order
}

// DefaultZones returns the first n available zones of the provider's region.
func DefaultZones(ctx *pulumi.Context, n int, opts ...pulumi.InvokeOption) ([]string, error) {
	res, err := aws.GetAvailabilityZones(ctx, &aws.GetAvailabilityZonesArgs{State: pulumi.StringRef("available")}, opts...)
	if err != nil {
		return nil, fmt.Errorf("listing availability zones: %w", err)
	}
	if len(res.Names) < n {
		return nil, fmt.Errorf("the region has %d available zones, EKS needs %d; set kolotoc:cluster.zones", len(res.Names), n)
	}
	return res.Names[:n], nil
}

// NewNetwork registers the VPC, its subnets, gateways and routes.
func NewNetwork(ctx *pulumi.Context, name string, args *NetworkArgs, opts ...pulumi.ResourceOption) (*Network, error) {
	if args == nil {
		return nil, errors.New("network: args are required")
	}
	if len(args.Zones) < 2 {
		return nil, fmt.Errorf("network %q: EKS needs at least two zones", name)
	}
	n := &Network{}
	if err := ctx.RegisterComponentResource("kolotoc:eks:Network", name, n, opts...); err != nil {
		return nil, fmt.Errorf("network %q: %w", name, err)
	}
	parent := pulumi.Parent(n)
	tags := func(suffix string, extra map[string]string) pulumi.StringMap {
		t := pulumi.StringMap{"Name": pulumi.String(args.Name + suffix)}
		for k, v := range extra {
			t[k] = pulumi.String(v)
		}
		return t
	}
	clusterTag := "kubernetes.io/cluster/" + args.ClusterName

	vpc, err := ec2.NewVpc(ctx, name, &ec2.VpcArgs{
		CidrBlock: pulumi.String(args.CIDR),
		// EFS mount targets are found by DNS name: the VPC must resolve them.
		EnableDnsHostnames: pulumi.Bool(true),
		EnableDnsSupport:   pulumi.Bool(true),
		Tags:               tags("", nil),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("network %q: VPC %q: %w", name, name, err)
	}
	igw, err := ec2.NewInternetGateway(ctx, name, &ec2.InternetGatewayArgs{VpcId: vpc.ID(), Tags: tags("", nil)}, parent)
	if err != nil {
		return nil, fmt.Errorf("network %q: internet gateway %q: %w", name, name, err)
	}
	public, err := ec2.NewRouteTable(ctx, name+"-public", &ec2.RouteTableArgs{
		VpcId:  vpc.ID(),
		Routes: ec2.RouteTableRouteArray{ec2.RouteTableRouteArgs{CidrBlock: pulumi.String("0.0.0.0/0"), GatewayId: igw.ID()}},
		Tags:   tags("-public", nil),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("network %q: route table %q: %w", name, name+"-public", err)
	}

	var publicSubnets []*ec2.Subnet
	for i, zone := range args.Zones {
		cidr, err := Subnet(args.CIDR, publicSubnetBits, publicSubnetBase+i)
		if err != nil {
			return nil, fmt.Errorf("network %q: %w", name, err)
		}
		sn, err := ec2.NewSubnet(ctx, fmt.Sprintf("%s-public-%s", name, zone), &ec2.SubnetArgs{
			VpcId: vpc.ID(), AvailabilityZone: pulumi.String(zone), CidrBlock: pulumi.String(cidr),
			Tags: tags("-public-"+zone, map[string]string{clusterTag: "shared", "kubernetes.io/role/elb": "1"}),
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("network %q: subnet %q: %w", name, name+"-public-"+zone, err)
		}
		if _, err := ec2.NewRouteTableAssociation(ctx, fmt.Sprintf("%s-public-%s", name, zone), &ec2.RouteTableAssociationArgs{
			SubnetId: sn.ID(), RouteTableId: public.ID(),
		}, parent); err != nil {
			return nil, fmt.Errorf("network %q: route table association %q: %w", name, name+"-public-"+zone, err)
		}
		publicSubnets = append(publicSubnets, sn)
	}

	// One NAT gateway, not one per zone: nodes only pull images through it, and a zone's outage
	// stalls pulls, not training.
	eip, err := ec2.NewEip(ctx, name+"-nat", &ec2.EipArgs{Domain: pulumi.String("vpc"), Tags: tags("-nat", nil)}, parent)
	if err != nil {
		return nil, fmt.Errorf("network %q: elastic IP %q: %w", name, name+"-nat", err)
	}
	nat, err := ec2.NewNatGateway(ctx, name, &ec2.NatGatewayArgs{
		AllocationId: eip.ID(), SubnetId: publicSubnets[0].ID(), Tags: tags("", nil),
	}, parent, pulumi.DependsOn([]pulumi.Resource{igw}))
	if err != nil {
		return nil, fmt.Errorf("network %q: NAT gateway %q: %w", name, name, err)
	}
	private, err := ec2.NewRouteTable(ctx, name+"-private", &ec2.RouteTableArgs{
		VpcId:  vpc.ID(),
		Routes: ec2.RouteTableRouteArray{ec2.RouteTableRouteArgs{CidrBlock: pulumi.String("0.0.0.0/0"), NatGatewayId: nat.ID()}},
		Tags:   tags("-private", nil),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("network %q: route table %q: %w", name, name+"-private", err)
	}
	for i, zone := range args.Zones {
		cidr, err := Subnet(args.CIDR, privateSubnetBits, i)
		if err != nil {
			return nil, fmt.Errorf("network %q: %w", name, err)
		}
		sn, err := ec2.NewSubnet(ctx, fmt.Sprintf("%s-private-%s", name, zone), &ec2.SubnetArgs{
			VpcId: vpc.ID(), AvailabilityZone: pulumi.String(zone), CidrBlock: pulumi.String(cidr),
			Tags: tags("-private-"+zone, map[string]string{clusterTag: "shared", "kubernetes.io/role/internal-elb": "1"}),
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("network %q: subnet %q: %w", name, name+"-private-"+zone, err)
		}
		if _, err := ec2.NewRouteTableAssociation(ctx, fmt.Sprintf("%s-private-%s", name, zone), &ec2.RouteTableAssociationArgs{
			SubnetId: sn.ID(), RouteTableId: private.ID(),
		}, parent); err != nil {
			return nil, fmt.Errorf("network %q: route table association %q: %w", name, name+"-private-"+zone, err)
		}
		n.PrivateSubnetIDs = append(n.PrivateSubnetIDs, sn.ID().ToStringOutput())
	}
	n.VPCID = vpc.ID().ToStringOutput()
	return n, meta.RegisterOutputs(ctx, n, pulumi.Map{"vpcId": n.VPCID, "privateSubnetIds": pulumi.StringArray(n.PrivateSubnetIDs)})
}

// Subnet is the index-th subnet of a CIDR with newBits more prefix bits (Terraform's cidrsubnet).
func Subnet(cidr string, newBits, index int) (string, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", fmt.Errorf("subnet %d: %w", index, err)
	}
	ones, bits := n.Mask.Size()
	if bits != 32 || ones+newBits > 32 || index < 0 || index >= 1<<newBits {
		return "", fmt.Errorf("cannot take subnet %d of %d more bits from %s", index, newBits, cidr)
	}
	base := binary.BigEndian.Uint32(n.IP.To4())
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, base|uint32(index)<<(32-ones-newBits))
	return fmt.Sprintf("%s/%d", ip, ones+newBits), nil
}
