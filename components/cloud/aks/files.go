package aks

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-azure-native-sdk/authorization/v2"
	"github.com/pulumi/pulumi-azure-native-sdk/storage/v2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// ShareName is the Azure Files share's name when FilesArgs.ShareName is empty (every stack's before
// kolotoc:storage.shareName).
const ShareName = "shared"

// LockLevel is the management lock on a protected storage account: nobody, not the portal, the
// CLI nor another Pulumi program, deletes the account, its share or its resource group until the
// lock is removed; the account can still be read and changed.
const LockLevel = "CanNotDelete"

// Share protocols (FilesArgs.Protocol), as Azure names them.
const (
	NFS = "NFS"
	SMB = "SMB"
)

// MountOptions are the SMB mount options of the share, as the Azure Files CSI driver documents
// them for workloads running as root: every file writable, symlinks kept, one connection per
// mount so that a remount never inherits a broken session.
var MountOptions = []string{"dir_mode=0777", "file_mode=0777", "uid=0", "gid=0", "mfsymlinks", "cache=strict", "actimeo=30", "nosharesock"}

// NFSMountOptions are the NFS share's mount options, as AKS documents them for Azure Files NFS:
// four TCP connections per mount (the ranks write checkpoints in parallel), a new source port on
// each reconnection (noresvport, which Azure recommends so that a mount recovers from a network
// interruption), and attribute caching of 30 s. The version and security options (vers=4,minorversion=1,sec=sys)
// are the driver's own, which it refuses to have set.
var NFSMountOptions = []string{"nconnect=4", "noresvport", "actimeo=30"}

// FilesArgs are the inputs of the shared Azure Files share.
type FilesArgs struct {
	Account       string             // storage account name: 3-24 lower-case letters and digits, unique across Azure
	ResourceGroup pulumi.StringInput // the stack's resource group
	Location      string             // Azure region
	Tier          string             // Premium (FileStorage, SSD) | Standard (StorageV2, large file shares)
	Protocol      string             // NFS (Premium only, no account key) | SMB (mounted with the key)
	QuotaGiB      int                // share size in GiB
	ShareName     string             // the share's name; "" is ShareName
	Protect       bool               // refuse `pulumi destroy` of the account and share (they hold the checkpoints)
	Tags          map[string]string
	// SubnetID, when set, is the only network that reaches the account (a virtual network rule;
	// the subnet needs the Microsoft.Storage service endpoint); empty = any network.
	SubnetID string
	// PrivateEndpoint (NFS, with SubnetID): the account's public endpoint refuses every network
	// and the share is reached through a private endpoint in the subnet (private.go).
	PrivateEndpoint bool
	// ShareRetentionDays > 0 turns on share soft delete for the account: a deleted share (by
	// Pulumi, a replacement, or by hand) is kept that many days (1..365) and can be undeleted;
	// 0 leaves the account's file service settings alone.
	ShareRetentionDays int
	// PrivateDNSZoneID, with PrivateEndpoint: an existing privatelink.file.core.windows.net zone,
	// already linked to the subnet's virtual network, in place of one made for the stack.
	PrivateDNSZoneID string
}

// Files is the storage account and its share.
type Files struct {
	pulumi.ResourceState
	Account   pulumi.StringOutput
	ShareName pulumi.StringOutput
	// Key is the account's first access key: a secret, handed to the CSI driver in a
	// Kubernetes Secret and nowhere else. Only an SMB share has one: with NFS it is never read
	// (the account refuses shared keys) and Key is the zero output.
	Key pulumi.StringOutput
	// FileService holds the account's share soft delete; nil without ShareRetentionDays.
	FileService *storage.FileServiceProperties
	// Lock is the CanNotDelete lock of a protected account; nil without Protect.
	Lock *authorization.ManagementLockByScope
	// Ready is what a mount of the share waits for: with a private endpoint, the DNS records that
	// point the account's name at it (a dependency on the component could miss them: the SDK
	// adds children from their registration goroutines); otherwise empty.
	Ready []pulumi.Resource
}

// NewFiles registers the storage account and the share, and reads the account's key for SMB.
func NewFiles(ctx *pulumi.Context, name string, args *FilesArgs, opts ...pulumi.ResourceOption) (*Files, error) {
	if args == nil {
		return nil, errors.New("files: args are required")
	}
	if args.QuotaGiB < 1 || args.Account == "" {
		return nil, fmt.Errorf("files %q: an account name and a quota are required", name)
	}
	if args.Protocol != NFS && args.Protocol != SMB {
		return nil, fmt.Errorf("files %q: protocol %q; allowed: %s, %s", name, args.Protocol, NFS, SMB)
	}
	if args.Protocol == NFS && (args.Tier != "Premium" || args.SubnetID == "") {
		return nil, fmt.Errorf("files %q: an NFS share needs a Premium account and a subnet", name)
	}
	if err := checkPrivateEndpoint(name, args); err != nil {
		return nil, err
	}
	f := &Files{}
	if err := ctx.RegisterComponentResource("kolotoc:aks:Files", name, f, opts...); err != nil {
		return nil, fmt.Errorf("files %q: %w", name, err)
	}
	protect := pulumi.Protect(args.Protect)
	account, err := storage.NewStorageAccount(ctx, name, RenderAccount(args), pulumi.Parent(f), protect)
	if err != nil {
		return nil, fmt.Errorf("files %q: storage account %q: %w", name, name, err)
	}
	share, err := storage.NewFileShare(ctx, name, RenderShare(args, account.Name), pulumi.Parent(f), protect)
	if err != nil {
		return nil, fmt.Errorf("files %q: file share %q: %w", name, name, err)
	}
	if args.ShareRetentionDays > 0 {
		if f.FileService, err = storage.NewFileServiceProperties(ctx, name, RenderFileService(args, account.Name), pulumi.Parent(f)); err != nil {
			return nil, fmt.Errorf("files %q: file service properties %q: %w", name, name, err)
		}
	}
	if args.Protect {
		f.Lock, err = authorization.NewManagementLockByScope(ctx, name, &authorization.ManagementLockByScopeArgs{
			Scope:    account.ID().ToStringOutput(),
			LockName: pulumi.String(name + "-protect"),
			Level:    pulumi.String(LockLevel),
			Notes:    pulumi.String("kolotoc:storage.protect: the shared checkpoints; set it to false and `pulumi up` before deleting"),
		}, pulumi.Parent(f)) // not Pulumi-protected: turning storage.protect off must be able to remove it
		if err != nil {
			return nil, fmt.Errorf("files %q: management lock %q: %w", name, name, err)
		}
	}
	if args.PrivateEndpoint {
		if f.Ready, err = privateEndpoint(ctx, name, args, account.ID().ToStringOutput(), pulumi.Parent(f)); err != nil {
			return nil, fmt.Errorf("files %q: %w", name, err)
		}
	}
	f.Account = account.Name
	f.ShareName = share.Name
	if args.Protocol == SMB {
		keys := storage.ListStorageAccountKeysOutput(ctx, storage.ListStorageAccountKeysOutputArgs{
			AccountName:       account.Name,
			ResourceGroupName: args.ResourceGroup,
		}, pulumi.Parent(f))
		f.Key = pulumi.ToSecret(keys.Keys().Index(pulumi.Int(0)).Value()).(pulumi.StringOutput)
	}
	// The key is not among the component's outputs: it is handed on, never shown.
	return f, meta.RegisterOutputs(ctx, f, pulumi.Map{"account": f.Account, "shareName": f.ShareName})
}

// shareName is the share's name: FilesArgs.ShareName, else ShareName.
func shareName(a *FilesArgs) string {
	if a.ShareName != "" {
		return a.ShareName
	}
	return ShareName
}

// RenderShare builds the share. Its protocol is chosen when it is created: a change replaces it.
// An NFS share keeps root as root (NoRootSquash): the workloads write their checkpoints as root.
func RenderShare(a *FilesArgs, account pulumi.StringInput) *storage.FileShareArgs {
	share := &storage.FileShareArgs{
		AccountName:       account,
		ResourceGroupName: a.ResourceGroup,
		ShareName:         pulumi.String(shareName(a)),
		ShareQuota:        pulumi.Int(a.QuotaGiB),
		EnabledProtocols:  pulumi.String(a.Protocol),
	}
	if a.Protocol == NFS {
		share.RootSquash = pulumi.String("NoRootSquash")
	}
	return share
}

// FileServiceName is the one file service of a storage account, as Azure names it.
const FileServiceName = "default"

// RenderFileService turns on share soft delete: a deleted share is kept ShareRetentionDays and
// can be undeleted (Azure Files, "Enable soft delete on Azure file shares",
// https://learn.microsoft.com/en-us/azure/storage/files/storage-files-enable-soft-delete).
// It does not outlive the account: deleting the storage account deletes its soft-deleted shares,
// which storage.protect's lock prevents.
func RenderFileService(a *FilesArgs, account pulumi.StringInput) *storage.FileServicePropertiesArgs {
	return &storage.FileServicePropertiesArgs{
		AccountName:       account,
		ResourceGroupName: a.ResourceGroup,
		FileServicesName:  pulumi.String(FileServiceName),
		ShareDeleteRetentionPolicy: &storage.DeleteRetentionPolicyArgs{
			Enabled: pulumi.Bool(true),
			Days:    pulumi.Int(a.ShareRetentionDays),
		},
	}
}

// publicNetworkAccess is the account's publicNetworkAccess: Disabled behind a private endpoint.
func publicNetworkAccess(a *FilesArgs) string {
	if a.PrivateEndpoint {
		return "Disabled"
	}
	return "Enabled"
}

// RenderAccount builds the storage account: TLS 1.2 at least, no public blob access, no
// replication to other tenants, and what the protocol and the subnet allow.
//
// NFS: no shared key (nothing mounts with one: an NFS client presents none), and HTTPS-only off,
// as Azure requires for NFS shares: NFS 4.1 is not encrypted in transit, and its traffic stays
// on the cluster's subnet and Azure's backbone (service endpoint). REST calls still get TLS 1.2.
//
// SMB: the Azure Files CSI driver mounts a static SMB volume with the account key, so shared-key
// access stays on, with HTTPS only.
//
// With a subnet, the storage firewall denies every network but that subnet (a virtual network
// rule, which needs the Microsoft.Storage service endpoint on it). publicNetworkAccess stays
// Enabled for that: service-endpoint traffic arrives at the public endpoint, and Disabled would
// refuse it too. With PrivateEndpoint it is Disabled: the public endpoint refuses every network,
// the subnet's included, and the share answers only at the private endpoint. Bypass None: no
// Azure service is let through on its own account. Pulumi is not affected: it reaches the account
// and the share through Azure Resource Manager, which the firewall does not filter.
func RenderAccount(a *FilesArgs) *storage.StorageAccountArgs {
	kind, sku := "FileStorage", "Premium_LRS"
	var largeShares pulumi.StringPtrInput
	if a.Tier == "Standard" {
		kind, sku = "StorageV2", "Standard_LRS"
		largeShares = pulumi.String("Enabled") // shares beyond 5 TiB
	}
	nfs := a.Protocol == NFS
	acct := &storage.StorageAccountArgs{
		AccountName:            pulumi.String(a.Account),
		ResourceGroupName:      a.ResourceGroup,
		Location:               pulumi.String(a.Location),
		Kind:                   pulumi.String(kind),
		Sku:                    &storage.SkuArgs{Name: pulumi.String(sku)},
		EnableHttpsTrafficOnly: pulumi.Bool(!nfs),
		MinimumTlsVersion:      pulumi.String("TLS1_2"),
		AllowBlobPublicAccess:  pulumi.Bool(false),
		// Object replication to other tenants is a way out for the checkpoints; nothing uses it.
		AllowCrossTenantReplication: pulumi.Bool(false),
		AllowSharedKeyAccess:        pulumi.Bool(!nfs),
		PublicNetworkAccess:         pulumi.String(publicNetworkAccess(a)),
		LargeFileSharesState:        largeShares,
		Tags:                        pulumi.ToStringMap(a.Tags),
	}
	if a.SubnetID != "" {
		acct.NetworkRuleSet = &storage.NetworkRuleSetArgs{
			DefaultAction: storage.DefaultActionDeny,
			Bypass:        pulumi.String("None"),
			VirtualNetworkRules: storage.VirtualNetworkRuleArray{storage.VirtualNetworkRuleArgs{
				VirtualNetworkResourceId: pulumi.String(a.SubnetID),
				Action:                   storage.ActionAllow,
			}},
		}
	}
	return acct
}
