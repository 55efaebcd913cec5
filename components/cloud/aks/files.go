package aks

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-azure-native-sdk/storage/v2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ShareName is the Azure Files share every stack uses.
const ShareName = "shared"

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

// RenderAccount builds the storage account: HTTPS and TLS 1.2 only, no public blob access.
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
		LargeFileSharesState:   largeShares,
		Tags:                   pulumi.ToStringMap(a.Tags),
	}
}
