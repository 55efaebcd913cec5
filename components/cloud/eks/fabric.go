package eks

import (
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// What a compact or EFA node group takes besides EKS's defaults, as AWS documents it:
//   - one subnet, so one zone: an EFA interface reaches only interfaces in the same subnet's
//     zone, and a cluster placement group lives in one zone (EC2, "Placement groups", Cluster);
//   - a cluster placement group of its own (EC2 "Placement strategies": cluster packs instances
//     close together inside a zone for low latency between them);
//   - one EFA interface per network card, through a launch template, every interface of type
//     efa, as eksctl's efaEnabled does (Amazon EKS, "Manage EFA devices on Amazon EKS": "all
//     interfaces are configured as interface type EFA"); the primary (card 0, device 0) keeps
//     the cluster security group for ordinary traffic, every other is device 1 on its card;
//   - a security group that lets EFA interfaces reach one another (EC2, "Get started with EFA
//     and NCCL", step 1: "allows all inbound and outbound traffic to and from the security
//     group itself"); a launch template that names interfaces names their security groups on
//     each interface and none of its own.
const (
	// PlacementStrategy is the EC2 placement group strategy of compact groups.
	PlacementStrategy = "cluster"
	// EFAInterface is the interface type of EFA interfaces (with ENA for IP traffic).
	EFAInterface = "efa"
	// rootDevice is the AL2023 AMIs' root device, whose size the launch template sets.
	rootDevice = "/dev/xvda"
)

// poolSubnets are the subnets a group's nodes run in: all the cluster's, or a compact group's one.
func poolSubnets(a *ClusterArgs, p Pool) []pulumi.StringInput {
	if !p.Compact || p.Subnet < 0 || p.Subnet >= len(a.SubnetIDs) {
		return a.SubnetIDs
	}
	return []pulumi.StringInput{a.SubnetIDs[p.Subnet]}
}

// newPoolFabric registers what a compact or EFA group needs (its placement group, the EFA
// security group, its launch template) and returns the launch template, nil for a group that
// keeps EKS's own.
func (c *Cluster) newPoolFabric(ctx *pulumi.Context, name string, a *ClusterArgs, p Pool, clusterSG pulumi.StringInput,
	opts ...pulumi.ResourceOption) (*ec2.LaunchTemplate, error) {
	if !p.Compact && p.EFAs == 0 {
		return nil, nil
	}
	if c.LaunchTemplates == nil {
		c.LaunchTemplates, c.PlacementGroups = map[string]*ec2.LaunchTemplate{}, map[string]*ec2.PlacementGroup{}
	}
	var placement pulumi.StringInput
	if p.Compact {
		pg, err := ec2.NewPlacementGroup(ctx, name+"-"+p.Name, RenderPlacementGroup(a, p), opts...)
		if err != nil {
			return nil, fmt.Errorf("eks %q: pool %s: %w", name, p.Name, err)
		}
		c.PlacementGroups[p.Name] = pg
		placement = pg.Name
	}
	var efaSG pulumi.StringInput
	if p.EFAs > 0 {
		if c.EFASecurityGroup == nil {
			sg, err := ec2.NewSecurityGroup(ctx, name+"-efa", RenderEFASecurityGroup(a), opts...)
			if err != nil {
				return nil, fmt.Errorf("eks %q: %w", name, err)
			}
			c.EFASecurityGroup = sg
		}
		efaSG = c.EFASecurityGroup.ID()
	}
	if p.Karpenter {
		return nil, nil // Karpenter makes its own launch templates from the pool's EC2NodeClass
	}
	lt, err := ec2.NewLaunchTemplate(ctx, name+"-"+p.Name, RenderLaunchTemplate(a, p, placement, clusterSG, efaSG), opts...)
	if err != nil {
		return nil, fmt.Errorf("eks %q: pool %s: %w", name, p.Name, err)
	}
	c.LaunchTemplates[p.Name] = lt
	return lt, nil
}

// RenderPlacementGroup is a compact group's cluster placement group, <cluster>-<pool>.
func RenderPlacementGroup(a *ClusterArgs, p Pool) *ec2.PlacementGroupArgs {
	return &ec2.PlacementGroupArgs{Name: pulumi.String(a.Name + "-" + p.Name), Strategy: pulumi.String(PlacementStrategy)}
}

// RenderEFASecurityGroup admits all traffic between the EFA interfaces, from and to the group
// itself, and nothing else: the primary interfaces keep the cluster security group too.
func RenderEFASecurityGroup(a *ClusterArgs) *ec2.SecurityGroupArgs {
	// Every protocol ("-1"), which takes ports 0 to 0.
	proto, from, to := pulumi.String("-1"), pulumi.Int(0), pulumi.Int(0)
	return &ec2.SecurityGroupArgs{
		Name:        pulumi.String(a.Name + "-efa"),
		Description: pulumi.String("EFA: all traffic between the EFA interfaces of " + a.Name + "'s GPU nodes"),
		VpcId:       a.VPCID,
		Ingress: ec2.SecurityGroupIngressArray{ec2.SecurityGroupIngressArgs{
			Protocol: proto, FromPort: from, ToPort: to, Self: pulumi.Bool(true), Description: pulumi.String("EFA from the group"),
		}},
		Egress: ec2.SecurityGroupEgressArray{ec2.SecurityGroupEgressArgs{
			Protocol: proto, FromPort: from, ToPort: to, Self: pulumi.Bool(true), Description: pulumi.String("EFA to the group"),
		}},
	}
}

// RenderLaunchTemplate is a compact or EFA group's launch template: the root volume (EKS refuses
// a node group's disk size beside a template), the placement group, and the EFA interfaces.
// It names no AMI, so EKS keeps choosing the group's AMI type and bootstrapping it.
func RenderLaunchTemplate(a *ClusterArgs, p Pool, placement, clusterSG, efaSG pulumi.StringInput) *ec2.LaunchTemplateArgs {
	lt := &ec2.LaunchTemplateArgs{
		Name:        pulumi.String(a.Name + "-" + p.Name),
		Description: pulumi.String("Kolotoc node group " + p.Name + ": root volume, placement, fabric"),
		BlockDeviceMappings: ec2.LaunchTemplateBlockDeviceMappingArray{ec2.LaunchTemplateBlockDeviceMappingArgs{
			DeviceName: pulumi.String(rootDevice),
			Ebs: &ec2.LaunchTemplateBlockDeviceMappingEbsArgs{
				VolumeSize: pulumi.Int(nodeDiskGiB), VolumeType: pulumi.String("gp3"),
				Encrypted: pulumi.String("true"), DeleteOnTermination: pulumi.String("true"),
			},
		}},
	}
	if placement != nil {
		lt.Placement = &ec2.LaunchTemplatePlacementArgs{GroupName: placement}
	}
	if p.EFAs > 0 {
		var nics ec2.LaunchTemplateNetworkInterfaceArray
		for i := 0; i < p.EFAs; i++ {
			nic := ec2.LaunchTemplateNetworkInterfaceArgs{
				DeviceIndex: pulumi.Int(1), NetworkCardIndex: pulumi.Int(i), InterfaceType: pulumi.String(EFAInterface),
				SecurityGroups: pulumi.StringArray{efaSG}, DeleteOnTermination: pulumi.String("true"),
			}
			if i == 0 {
				nic.DeviceIndex = pulumi.Int(0)
				nic.SecurityGroups = pulumi.StringArray{clusterSG, efaSG}
			}
			nics = append(nics, nic)
		}
		lt.NetworkInterfaces = nics
	}
	return lt
}
