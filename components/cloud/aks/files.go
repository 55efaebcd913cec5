package aks

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-azure-native-sdk/authorization/v2"
	"github.com/pulumi/pulumi-azure-native-sdk/storage/v2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ShareName is the Azure Files share every stack uses.
const ShareName = "shared"

// LockLevel is the management lock on a protected storage account: nobody, not the portal, the
// CLI nor another Pulumi program, deletes the account, its share or its resource group until the
// lock is removed; the account can still be read and changed.
const LockLevel = "CanNotDelete"

// MountOptions are the SMB mount options of the share, as the Azure Files CSI driver documents
// them for workloads running as root: every file writable, symlinks kept, one connection per
// mount so that a remount never inherits a broken session.
var MountOptions = []string{"dir_mode=0777", "file_mode=0777", "uid=0", "gid=0", "mfsymlinks", "cache=strict", "actimeo=30", "nosharesock"}

// FilesArgs are the inputs of the shared Azure Files share.
type FilesArgs struct {
	Account       string             // storage account name: 3-24 lower-case letters and digits, unique across Azure
	ResourceGroup pulumi.StringInput // the stack's resource group
	Location      string             // Azure region
	Tier          string             // Premium (FileStorage, SSD) | Standard (StorageV2, large file shares)
	QuotaGiB      int                // share size in GiB
	Protect       bool               // refuse `pulumi destroy` of the account and share (they hold the checkpoints)
	Tags          map[string]string
}

// Files is the storage account and its share.
type Files struct {
	pulumi.ResourceState
	Account   pulumi.StringOutput
	ShareName pulumi.StringOutput
	// Key is the account's first access key: a secret, handed to the CSI driver in a
	// Kubernetes Secret and nowhere else.
	Key pulumi.StringOutput
	// Lock is the CanNotDelete lock of a protected account; nil without Protect.
	Lock *authorization.ManagementLockByScope
}

// NewFiles registers the storage account and the share, and reads the account's key.
func NewFiles(ctx *pulumi.Context, name string, args *FilesArgs, opts ...pulumi.ResourceOption) (*Files, error) {
	if args == nil {
		return nil, errors.New("files: args are required")
	}
	if args.QuotaGiB < 1 || args.Account == "" {
		return nil, fmt.Errorf("files %q: an account name and a quota are required", name)
	}
	f := &Files{}
	if err := ctx.RegisterComponentResource("kolotoc:aks:Files", name, f, opts...); err != nil {
		return nil, err
	}
	protect := pulumi.Protect(args.Protect)
	account, err := storage.NewStorageAccount(ctx, name, RenderAccount(args), pulumi.Parent(f), protect)
	if err != nil {
		return nil, err
	}
	share, err := storage.NewFileShare(ctx, name, &storage.FileShareArgs{
		AccountName:       account.Name,
		ResourceGroupName: args.ResourceGroup,
		ShareName:         pulumi.String(ShareName),
		ShareQuota:        pulumi.Int(args.QuotaGiB),
		EnabledProtocols:  pulumi.String("SMB"),
	}, pulumi.Parent(f), protect)
	if err != nil {
		return nil, err
	}
	if args.Protect {
		f.Lock, err = authorization.NewManagementLockByScope(ctx, name, &authorization.ManagementLockByScopeArgs{
			Scope:    account.ID().ToStringOutput(),
			LockName: pulumi.String(name + "-protect"),
			Level:    pulumi.String(LockLevel),
			Notes:    pulumi.String("kolotoc:storage.protect: the shared checkpoints; set it to false and `pulumi up` before deleting"),
		}, pulumi.Parent(f)) // not Pulumi-protected: turning storage.protect off must be able to remove it
		if err != nil {
			return nil, err
		}
	}
	keys := storage.ListStorageAccountKeysOutput(ctx, storage.ListStorageAccountKeysOutputArgs{
		AccountName:       account.Name,
		ResourceGroupName: args.ResourceGroup,
	}, pulumi.Parent(f))
	f.Account = account.Name
	f.ShareName = share.Name
	f.Key = pulumi.ToSecret(keys.Keys().Index(pulumi.Int(0)).Value()).(pulumi.StringOutput)
	// The key is not among the component's outputs: it is handed on, never shown.
	return f, ctx.RegisterResourceOutputs(f, pulumi.Map{"account": f.Account, "shareName": f.ShareName})
}

// RenderAccount builds the storage account: HTTPS and TLS 1.2 only, no public blob access, no
// replication to other tenants.
//
// Two settings stay open, on purpose. Shared-key access: the share is SMB, and the Azure Files
// CSI driver mounts a static SMB volume with the account key (an NFS share would need no key,
// but NFS is reachable only through a virtual network rule or a private endpoint on the
// cluster's subnet). Public network access: AKS makes and owns the cluster's virtual network in
// its node resource group, so its subnet cannot be named here or given the Microsoft.Storage
// service endpoint a network rule needs without the azure-native network module (5.6 GB to
// compile); denying public access would cut the nodes off from the share.
func RenderAccount(a *FilesArgs) *storage.StorageAccountArgs {
	kind, sku := "FileStorage", "Premium_LRS"
	var largeShares pulumi.StringPtrInput
	if a.Tier == "Standard" {
		kind, sku = "StorageV2", "Standard_LRS"
		largeShares = pulumi.String("Enabled") // shares beyond 5 TiB
	}
	return &storage.StorageAccountArgs{
		AccountName:            pulumi.String(a.Account),
		ResourceGroupName:      a.ResourceGroup,
		Location:               pulumi.String(a.Location),
		Kind:                   pulumi.String(kind),
		Sku:                    &storage.SkuArgs{Name: pulumi.String(sku)},
		EnableHttpsTrafficOnly: pulumi.Bool(true),
		MinimumTlsVersion:      pulumi.String("TLS1_2"),
		AllowBlobPublicAccess:  pulumi.Bool(false),
		// Object replication to other tenants is a way out for the checkpoints; nothing uses it.
		AllowCrossTenantReplication: pulumi.Bool(false),
		// Both stay on, see above: the SMB mount needs the key and the nodes reach the account
		// over its public endpoint.
		AllowSharedKeyAccess: pulumi.Bool(true),
		PublicNetworkAccess:  pulumi.String("Enabled"),
		LargeFileSharesState: largeShares,
		Tags:                 pulumi.ToStringMap(a.Tags),
	}
}
