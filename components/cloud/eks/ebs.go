package eks

import (
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

const (
	// EBSCSIAddon is the EKS add-on of the EBS CSI driver. EKS does not install it ("enabled by
	// default in EKS clusters >= 1.23, but not installed"), and without it a claim on a block
	// volume (etcd's members) stays Pending for good.
	EBSCSIAddon = "aws-ebs-csi-driver"
	// EBSCSIServiceAccount is the driver's controller service account; it receives the role.
	EBSCSIServiceAccount = "ebs-csi-controller-sa"
	// EBSCSIPolicy lets the driver create, attach and delete EBS volumes.
	EBSCSIPolicy = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
	// EBSCSIConfiguration turns on the add-on's default StorageClass, ebs-csi-default-sc (gp3,
	// WaitForFirstConsumer, annotated default): since Kubernetes 1.30 EKS no longer marks its own
	// gp2 class as the default, and etcd's members claim the cluster's default class unless
	// etcd.storageClass names another. The class sets no encryption of its own: volumes are
	// encrypted only where the account encrypts EBS by default.
	EBSCSIConfiguration = `{"defaultStorageClass":{"enabled":true}}`
)

// newEBSCSI registers the EBS CSI driver add-on with its controller's role (through Pod
// Identity, as the EFS driver's), after deps: the node groups and the pod identity agent.
func (c *Cluster) newEBSCSI(ctx *pulumi.Context, name, roleName string, deps []pulumi.Resource) (err error) {
	c.EBSCSI, err = newDriverAddon(ctx, name+"-ebs-csi", roleName+"-ebs-csi", EBSCSIPolicy, func(role pulumi.StringInput) *eks.AddonArgs {
		return RenderEBSCSI(c.Cluster.Name, role)
	}, deps, pulumi.Parent(c))
	return err // nil, or naming the add-on or its role
}

// newDriverAddon registers a CSI driver's add-on (render, given its role's ARN) whose controller
// holds a role named roleName with policy, through Pod Identity, which assumes it with
// sts:TagSession besides sts:AssumeRole. The role and the add-on are both registered as name;
// the add-on waits for deps and for the role's policy attachment.
func newDriverAddon(ctx *pulumi.Context, name, roleName, policy string, render func(role pulumi.StringInput) *eks.AddonArgs,
	deps []pulumi.Resource, parent pulumi.ResourceOption) (*eks.Addon, error) {
	role, attached, err := newRole(ctx, name, roleName,
		TrustPolicy(podIdentityService, "sts:AssumeRole", "sts:TagSession"), []string{policy}, parent)
	if err != nil {
		return nil, fmt.Errorf("add-on %q: %w", name, err)
	}
	addon, err := eks.NewAddon(ctx, name, render(role.Arn), parent,
		pulumi.DependsOn(append(append([]pulumi.Resource{}, deps...), attached...)))
	if err != nil {
		return nil, fmt.Errorf("add-on %q: %w", name, err)
	}
	return addon, nil
}

// RenderEBSCSI builds the EBS CSI driver add-on: its controller's role, and the default class.
func RenderEBSCSI(cluster, role pulumi.StringInput) *eks.AddonArgs {
	return &eks.AddonArgs{
		ClusterName:         cluster,
		AddonName:           pulumi.String(EBSCSIAddon),
		ConfigurationValues: pulumi.String(EBSCSIConfiguration),
		PodIdentityAssociations: eks.AddonPodIdentityAssociationArray{eks.AddonPodIdentityAssociationArgs{
			RoleArn: role, ServiceAccount: pulumi.String(EBSCSIServiceAccount),
		}},
	}
}
