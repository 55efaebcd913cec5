package eks

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// EFSCSIAddon is the EKS add-on of the EFS CSI driver.
	EFSCSIAddon = "aws-efs-csi-driver"
	// EFSCSIServiceAccount is the driver's controller service account; it receives the role.
	EFSCSIServiceAccount = "efs-csi-controller-sa"
	// EFSCSIPolicy lets the driver manage access points (dynamic provisioning).
	EFSCSIPolicy = "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
	// nfsPort is the one port EFS listens on.
	nfsPort = 2049
	// podIdentityService is the principal that EKS Pod Identity assumes roles as.
	podIdentityService = "pods.eks.amazonaws.com"
)

// EFSArgs are the inputs of the shared EFS file system.
type EFSArgs struct {
	Name                string               // creation token, Name tag and prefix of the security group and role names
	ClusterName         pulumi.StringInput   // EKS cluster the CSI add-on goes into
	VPCID               pulumi.StringInput   // VPC of the mount targets' security group
	SubnetIDs           []pulumi.StringInput // one mount target in each
	NodeSecurityGroupID pulumi.StringInput   // the only source allowed to reach NFS
	ThroughputMode      string               // elastic | bursting | provisioned
	PerformanceMode     string               // generalPurpose | maxIO; "" is generalPurpose
	ProvisionedMibps    int                  // MiB/s with ThroughputMode provisioned
	Protect             bool                 // refuse `pulumi destroy` of the file system (it holds the checkpoints)
	DependsOn           []pulumi.Resource    // what the add-on needs first: the node groups and the pod identity agent
	// Backup: the file system's automatic backups on (an EFS backup policy, ENABLED: AWS Backup
	// backs it up daily in its default plan and keeps each backup 35 days); false leaves them
	// off, as EFS's API creates file systems.
	Backup bool
	// FileSystemID, when set, is an existing file system to mount: no file system, mount target
	// or security group is created (the file system's own mount targets must admit NFS from the
	// nodes), only the CSI driver that mounts it.
	FileSystemID string
}

// EFS is the file system, its mount targets and the CSI driver that mounts it.
type EFS struct {
	pulumi.ResourceState
	FileSystemID  pulumi.StringOutput
	SecurityGroup *ec2.SecurityGroup
	Driver        *eks.Addon
	// BackupPolicy turns the automatic backups on; nil without EFSArgs.Backup.
	BackupPolicy *efs.BackupPolicy
	MountTargets []*efs.MountTarget
}

// NewEFS registers the file system, reachable over NFS from the nodes only, and the CSI driver;
// with FileSystemID, the driver alone.
func NewEFS(ctx *pulumi.Context, name string, args *EFSArgs, opts ...pulumi.ResourceOption) (*EFS, error) {
	if args == nil {
		return nil, errors.New("efs: args are required")
	}
	if len(args.SubnetIDs) == 0 && args.FileSystemID == "" {
		return nil, fmt.Errorf("efs %q: at least one subnet is required", name)
	}
	e := &EFS{}
	if err := ctx.RegisterComponentResource("kolotoc:eks:EFS", name, e, opts...); err != nil {
		return nil, fmt.Errorf("efs %q: %w", name, err)
	}
	parent := pulumi.Parent(e)
	deps := append([]pulumi.Resource(nil), args.DependsOn...)
	if args.FileSystemID != "" {
		e.FileSystemID = pulumi.String(args.FileSystemID).ToStringOutput()
	} else if err := e.newFileSystem(ctx, name, args, &deps); err != nil {
		return nil, fmt.Errorf("efs %q: %w", name, err)
	}

	var err error
	e.Driver, err = newDriverAddon(ctx, name+"-csi", args.Name+"-csi", EFSCSIPolicy, func(role pulumi.StringInput) *eks.AddonArgs {
		return &eks.AddonArgs{
			ClusterName: args.ClusterName,
			AddonName:   pulumi.String(EFSCSIAddon),
			PodIdentityAssociations: eks.AddonPodIdentityAssociationArray{eks.AddonPodIdentityAssociationArgs{
				RoleArn: role, ServiceAccount: pulumi.String(EFSCSIServiceAccount),
			}},
		}
	}, deps, parent)
	if err != nil {
		return nil, fmt.Errorf("efs %q: %w", name, err)
	}
	return e, meta.RegisterOutputs(ctx, e, pulumi.Map{"fileSystemId": e.FileSystemID})
}

// newFileSystem registers the file system, its security group and a mount target in each subnet;
// the driver waits for the mount targets (deps).
func (e *EFS) newFileSystem(ctx *pulumi.Context, name string, args *EFSArgs, deps *[]pulumi.Resource) error {
	parent := pulumi.Parent(e)
	sg, err := ec2.NewSecurityGroup(ctx, name, RenderSecurityGroup(args), parent)
	if err != nil {
		return fmt.Errorf("security group %q: %w", name, err)
	}
	e.SecurityGroup = sg
	perf := args.PerformanceMode
	if perf == "" {
		perf = "generalPurpose"
	}
	fsArgs := &efs.FileSystemArgs{
		CreationToken:   pulumi.String(args.Name),
		Encrypted:       pulumi.Bool(true),
		PerformanceMode: pulumi.String(perf),
		ThroughputMode:  pulumi.String(args.ThroughputMode),
		Tags:            pulumi.StringMap{"Name": pulumi.String(args.Name)},
	}
	if args.ThroughputMode == "provisioned" {
		fsArgs.ProvisionedThroughputInMibps = pulumi.Float64(float64(args.ProvisionedMibps))
	}
	fs, err := efs.NewFileSystem(ctx, name, fsArgs, parent, pulumi.Protect(args.Protect))
	if err != nil {
		return fmt.Errorf("file system %q: %w", name, err)
	}
	e.FileSystemID = fs.ID().ToStringOutput()
	if args.Backup {
		if e.BackupPolicy, err = efs.NewBackupPolicy(ctx, name, RenderBackupPolicy(fs.ID()), parent); err != nil {
			return fmt.Errorf("backup policy %q: %w", name, err)
		}
	}
	for i, subnet := range args.SubnetIDs {
		mt, err := efs.NewMountTarget(ctx, fmt.Sprintf("%s-%d", name, i), &efs.MountTargetArgs{
			FileSystemId:   fs.ID(),
			SubnetId:       subnet,
			SecurityGroups: pulumi.StringArray{sg.ID()},
		}, parent)
		if err != nil {
			return fmt.Errorf("mount target %q: %w", fmt.Sprintf("%s-%d", name, i), err)
		}
		e.MountTargets = append(e.MountTargets, mt)
		*deps = append(*deps, mt)
	}
	return nil
}

// RenderSecurityGroup builds the mount targets' security group: NFS in from the nodes' security
// group and from nothing else; no CIDR, so no address outside the cluster can reach the data.
func RenderSecurityGroup(a *EFSArgs) *ec2.SecurityGroupArgs {
	return &ec2.SecurityGroupArgs{
		Name:        pulumi.String(a.Name),
		Description: pulumi.String("NFS to the shared EFS file system, from the cluster's nodes only"),
		VpcId:       a.VPCID,
		Ingress: ec2.SecurityGroupIngressArray{ec2.SecurityGroupIngressArgs{
			Description:    pulumi.String("NFS from the EKS nodes"),
			Protocol:       pulumi.String("tcp"),
			FromPort:       pulumi.Int(nfsPort),
			ToPort:         pulumi.Int(nfsPort),
			SecurityGroups: pulumi.StringArray{a.NodeSecurityGroupID},
		}},
		Tags: pulumi.StringMap{"Name": pulumi.String(a.Name)},
	}
}

// BackupStatus is the status of an EFS backup policy that turns automatic backups on.
const BackupStatus = "ENABLED"

// RenderBackupPolicy turns on the file system's automatic backups: AWS Backup then backs it up
// daily in its default backup plan and vault, each backup kept 35 days (Amazon EFS, "Backing
// up EFS file systems", https://docs.aws.amazon.com/efs/latest/ug/awsbackup.html). Deleting the
// policy (storage.backup.enabled false) turns them off; the backups taken stay in the vault.
func RenderBackupPolicy(fileSystem pulumi.IDOutput) *efs.BackupPolicyArgs {
	return &efs.BackupPolicyArgs{
		FileSystemId: fileSystem.ToStringOutput(),
		BackupPolicy: &efs.BackupPolicyBackupPolicyArgs{Status: pulumi.String(BackupStatus)},
	}
}
