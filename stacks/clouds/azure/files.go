package azure

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/cloud/aks"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
	"kolotoc/stacks"
)

// Azure Files tiers for `kolotoc:storage.tier`, and protocols for `kolotoc:storage.protocol`,
// with storage.type azurefiles.
const (
	AzureFilesPremium  = "Premium"
	AzureFilesStandard = "Standard"
	// AzureFilesNFS: an NFS 4.1 share on a Premium account that takes no key and answers the
	// cluster's subnet only.
	AzureFilesNFS = "nfs"
	// AzureFilesSMB: an SMB share the CSI driver mounts with the account key.
	AzureFilesSMB = "smb"
)

const (
	// defaultAzureFilesTier: Premium (SSD, FileStorage account) gives the IOPS that many ranks
	// writing checkpoints at once need; Standard is for small experiments.
	defaultAzureFilesTier = AzureFilesPremium
	// defaultAzureShareName: the share every stack used before storage.shareName.
	defaultAzureShareName = "shared"
	// defaultShareRetentionDays: Azure's own default for share soft delete when the portal turns
	// it on (days): a week to notice a deleted share.
	defaultShareRetentionDays = 7
	// maxShareRetentionDays: the longest share soft delete Azure keeps (days): Azure Files,
	// "Enable soft delete on Azure file shares", https://learn.microsoft.com/en-us/azure/storage/files/storage-files-enable-soft-delete
	maxShareRetentionDays = 365
)

var (
	allowedAzureFilesTiers     = []string{AzureFilesPremium, AzureFilesStandard}
	allowedAzureFilesProtocols = []string{AzureFilesNFS, AzureFilesSMB}
	// azureFilesMinGiB, azureFilesMaxGiB: share quota range (GiB); Premium shares are provisioned
	// from 100 GiB, large file shares go up to 100 TiB.
	azureFilesMinGiB = map[string]int64{AzureFilesPremium: 100, AzureFilesStandard: 1}
	azureFilesMaxGiB = int64(102400)

	storageAccount = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
	// azureShareName: 3-63 lower-case letters, digits and single hyphens, starting and ending with
	// a letter or digit (length checked apart).
	azureShareName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// azureResourceGroupPattern: 1-90 letters, digits, '-', '_', '.', '(' and ')', not ending with '.'.
	azureResourceGroupPattern = regexp.MustCompile(`^[-\w.()]{0,89}[-\w()]$`)
	// privateFilesZoneID is an existing private DNS zone of the file service (storage.privateDnsZoneId).
	privateFilesZoneID = regexp.MustCompile(`(?i)^/subscriptions/[0-9a-f-]{36}/resourceGroups/[^/]+/providers/Microsoft\.Network/privateDnsZones/privatelink\.file\.core\.windows\.net$`)
)

// store is Azure Files (storage.type azurefiles): a share in a storage account the azure cloud
// creates, or an existing share (storage.share) it or an existing cluster mounts through the
// Azure Files CSI driver.
var store = &stacks.Store{
	Type:         storage.TypeAzureFiles,
	ExistingHint: storage.TypeAzureFiles + " (with storage.share)",
	Existing:     func(s storage.Config) bool { return s.Share != "" },
	Defaults:     storeDefaults,
	Check:        checkStore,
	Identity:     identity,
	Older:        olderIdentity,
	Mount:        mountExisting,
	Backup: func(c *stacks.Config, v *stacks.Validator) {
		if b := c.Storage.Backup; b.RetentionDays < 1 || b.RetentionDays > maxShareRetentionDays {
			v.Add("storage.backup.retentionDays", strconv.Itoa(b.RetentionDays), fmt.Sprintf("allowed: 1..%d (days a deleted share is kept)", maxShareRetentionDays))
		}
	},
}

// storeDefaults fills a created share's tier, account and name, the protocol, and the share's
// backup retention. Zero values only.
func storeDefaults(c *stacks.Config) {
	s := &c.Storage
	if s.Share == "" { // an existing share: its account, tier and protocol are named, never derived
		meta.Fill(&s.Tier, defaultAzureFilesTier)
		meta.Fill(&s.Account, DefaultStorageAccount(c.Project, c.Stack, c.Cluster.Name))
		meta.Fill(&s.ShareName, defaultAzureShareName)
		// The protocol: NFS, which needs no key and no public network, wherever it can run (a
		// subnet of the user's own, for the storage firewall to name); SMB otherwise, as before
		// the key existed.
		if s.Protocol == "" {
			s.Protocol = AzureFilesSMB
			if c.Cluster.SubnetID != "" {
				s.Protocol = AzureFilesNFS
			}
		}
	}
	if b := &s.Backup; b.Enabled {
		meta.Fill(&b.RetentionDays, defaultShareRetentionDays)
	}
}

// DefaultStorageAccount derives a storage account name: letters and digits of the cluster name
// (or kolotoc) and a hash of project, stack and cluster, so two stacks never collide on Azure's
// global namespace and the name is the same on every run.
func DefaultStorageAccount(project, stack, cluster string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(cluster) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	base := b.String()
	meta.Fill(&base, "kolotoc")
	sum := sha256.Sum256([]byte(project + "/" + stack + "/" + cluster))
	suffix := hex.EncodeToString(sum[:])[:8]
	if len(base) > 24-len(suffix) {
		base = base[:24-len(suffix)]
	}
	return base + suffix
}

// checkStore checks a created share's tier, size, names and network, an existing share's keys,
// the account key; the keys are Azure Files' alone.
func checkStore(c *stacks.Config, v *stacks.Validator) {
	s := c.Storage
	if c.StorageAccountKey.IsSet() && !(s.Type == storage.TypeAzureFiles && s.Share != "" && s.Protocol == AzureFilesSMB) {
		v.Add("storageAccountKey", "[secret]", "only for an existing SMB share (storage.type azurefiles with storage.share and "+
			"storage.protocol smb), which is mounted with it; without storage.share Kolotoc creates the account and reads its key itself; remove it")
	}
	if s.PrivateDNSZoneID != "" && !s.PrivateEndpoint {
		v.Add("storage.privateDnsZoneId", s.PrivateDNSZoneID, "only with storage.privateEndpoint: true")
	}
	if s.Type != storage.TypeAzureFiles || s.Share != "" {
		if s.PrivateEndpoint {
			v.Add("storage.privateEndpoint", "true", "only for a share the stack creates (storage.type azurefiles without storage.share)")
		}
	}
	if s.Type != storage.TypeAzureFiles {
		if s.ShareName != "" {
			v.Add("storage.shareName", s.ShareName, "only for storage.type azurefiles")
		}
		if s.Share != "" {
			v.Add("storage.share", s.Share, "only for storage.type "+storage.TypeAzureFiles)
		}
		if s.ResourceGroup != "" {
			v.Add("storage.resourceGroup", s.ResourceGroup, "only for storage.type "+storage.TypeAzureFiles+" with storage.share")
		}
		if s.Protocol != "" {
			v.Add("storage.protocol", s.Protocol, "only for storage.type azurefiles")
		}
		return
	}
	if s.Share != "" {
		if s.ShareName != "" {
			v.Add("storage.shareName", s.ShareName, "names the share Kolotoc creates; with storage.share (an existing share) leave it unset")
		}
		checkExisting(c, v) // its protocol is checked with it
		return
	}
	if s.ResourceGroup != "" {
		v.Add("storage.resourceGroup", s.ResourceGroup, "only with storage.share: the resource group of an existing share's account "+
			"(a created account lives in the stack's own)")
	}
	if c.CloudEntry().Given() {
		v.Add("storage.share", "(unset)", "required with storage.type azurefiles on cloud existing: Kolotoc creates no storage account there; "+
			"name your share, its storage.account and storage.resourceGroup")
	}
	v.OneOf("storage.tier", s.Tier, allowedAzureFilesTiers)
	if size, err := resource.ParseQuantity(s.Size); err == nil {
		gib := (size.Value() + (1<<30 - 1)) >> 30 // rounded up
		if min, ok := azureFilesMinGiB[s.Tier]; ok && (gib < min || gib > azureFilesMaxGiB) {
			v.Add("storage.size", s.Size, fmt.Sprintf("an Azure Files %s share holds %dGi to %dGi; allowed: %dGi..%dGi", s.Tier, min, azureFilesMaxGiB, min, azureFilesMaxGiB))
		}
	}
	// Share names: 3-63 lower-case letters, digits and single hyphens, starting and ending
	// with a letter or digit (the rule storage.share follows).
	if len(s.ShareName) < 3 || len(s.ShareName) > 63 || !azureShareName.MatchString(s.ShareName) {
		v.Add("storage.shareName", s.ShareName, "Azure share names are 3-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit")
	}
	if !storageAccount.MatchString(s.Account) {
		v.Add("storage.account", s.Account, "storage account names are 3-24 lower-case letters and digits (and unique across Azure); or leave it unset for a derived one")
	}
	if s.PrivateEndpoint && s.Protocol != AzureFilesNFS {
		v.Add("storage.privateEndpoint", "true", "a private endpoint serves the NFS share (storage.protocol nfs, with cluster.subnetId); allowed with smb: false")
	}
	if z := s.PrivateDNSZoneID; z != "" && !privateFilesZoneID.MatchString(z) {
		v.Add("storage.privateDnsZoneId", z, "allowed: the resource ID of a "+aks.FilesPrivateZone+" zone, "+
			"/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/privateDnsZones/"+aks.FilesPrivateZone)
	}
	v.OneOf("storage.protocol", s.Protocol, allowedAzureFilesProtocols)
	if s.Protocol != AzureFilesNFS {
		return
	}
	if c.Cluster.SubnetID == "" {
		v.Add("storage.protocol", s.Protocol, "an NFS share answers only a virtual network rule, and needs cluster.subnetId: "+
			"the subnet the cluster runs in, with the Microsoft.Storage service endpoint; allowed without it: smb (mounted with the account key)")
	}
	if s.Tier != AzureFilesPremium {
		v.Add("storage.tier", s.Tier, "Azure Files serves NFS from Premium (FileStorage) accounts only; allowed with storage.protocol nfs: Premium "+
			"(or storage.protocol smb)")
	}
}

// checkExisting checks an existing share's keys: its name, account, resource group and protocol.
func checkExisting(c *stacks.Config, v *stacks.Validator) {
	s := c.Storage
	if len(s.Share) < 3 || len(s.Share) > 63 || !azureShareName.MatchString(s.Share) {
		v.Add("storage.share", s.Share, "not an Azure Files share name; allowed: 3-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit")
	}
	switch {
	case s.Account == "":
		v.Add("storage.account", "(unset)", "required with storage.share: the existing storage account the share is in")
	case !storageAccount.MatchString(s.Account):
		v.Add("storage.account", s.Account, "storage account names are 3-24 lower-case letters and digits")
	}
	switch {
	case s.ResourceGroup == "":
		v.Add("storage.resourceGroup", "(unset)", "required with storage.share: the resource group of storage.account "+
			"(az storage account show -n <account> --query resourceGroup)")
	case !azureResourceGroupPattern.MatchString(s.ResourceGroup):
		v.Add("storage.resourceGroup", s.ResourceGroup, "not a resource group name; allowed: 1-90 letters, digits, '-', '_', '.', '(' and ')', not ending with '.'")
	}
	if s.Tier != "" {
		v.Add("storage.tier", s.Tier, "an existing share keeps its account's tier; remove it (or storage.share, to create one)")
	}
	switch s.Protocol {
	case "":
		v.Add("storage.protocol", "(unset)", "required with storage.share: the existing share's protocol; allowed: nfs (mounted without a key), "+
			"smb (mounted with kolotoc:storageAccountKey)")
	case AzureFilesSMB:
		if !c.StorageAccountKey.IsSet() && !c.CloudEntry().Local {
			v.Add("storageAccountKey", "(unset)", "required with an existing SMB share: its account's key, which the CSI driver mounts with; "+
				"run `az storage account keys list -n "+s.Account+" --query '[0].value' -o tsv | pulumi config set --secret kolotoc:storageAccountKey`")
		}
	case AzureFilesNFS:
	default:
		v.OneOf("storage.protocol", s.Protocol, allowedAzureFilesProtocols)
	}
}

// identity: a storage account lives in one region, its name and kind are fixed, and a share's
// protocol is chosen when it is created; an existing share is named by its share and resource
// group.
func identity(c *stacks.Config, id map[string]string) {
	s := c.Storage
	id["cluster.region"], id["storage.tier"], id["storage.account"] = c.Cluster.Region, s.Tier, s.Account
	id["storage.protocol"] = s.Protocol
	if s.ShareName != "" && s.ShareName != defaultAzureShareName {
		id["storage.shareName"] = s.ShareName // a new name is a new share; the default is not recorded (as before the key)
	}
	if s.Share != "" {
		id["storage.share"], id["storage.resourceGroup"] = s.Share, s.ResourceGroup
	}
}

// olderIdentity fills in what an update by an older version did not record but deployed all the
// same: Azure Files shares were SMB before storage.protocol existed.
func olderIdentity(previous map[string]string) map[string]string {
	if previous["storage.type"] != storage.TypeAzureFiles || previous["storage.protocol"] != "" {
		return previous
	}
	filled := make(map[string]string, len(previous)+1)
	for k, v := range previous {
		filled[k] = v
	}
	filled["storage.protocol"] = AzureFilesSMB
	return filled
}

// backupDays is the Azure Files share soft delete retention (days), 0 without a backup.
func backupDays(s storage.Config) int {
	if !s.Backup.Enabled {
		return 0
	}
	return s.Backup.RetentionDays
}

// filesVolume is how the shared volume reaches the Azure Files share, through the Azure Files CSI
// driver. An NFS share needs nothing secret: it answers the cluster's subnet and asks for no key.
// An SMB share is mounted with the account key, which goes into a Kubernetes Secret.
func filesVolume(files *aks.Files, resourceGroup pulumi.StringOutput, nfs bool) *stacks.CloudVolume {
	a := &stacks.CloudVolume{}
	// With a private endpoint, the volume waits for the share's private DNS records, so that
	// no node mounts it through a name that still points at the closed public endpoint.
	a.VolumeDeps = files.Ready
	if nfs {
		a.MountOptions = aks.NFSMountOptions
		a.CSI = &storage.CSI{
			Driver: storage.AzureFilesDriver,
			// The driver's form for a share it did not provision, <account>_<share> ('#' is
			// its own); the attributes say where the share is.
			VolumeHandle: pulumi.Sprintf("%s_%s", files.Account, files.ShareName),
			Attributes: pulumi.StringMap{
				"resourceGroup":  resourceGroup,
				"storageAccount": files.Account,
				"shareName":      files.ShareName,
				"protocol":       pulumi.String("nfs"),
			},
		}
		return a
	}
	a.MountOptions = aks.MountOptions
	a.CSI = &storage.CSI{
		Driver:       storage.AzureFilesDriver,
		VolumeHandle: pulumi.Sprintf("%s#%s#%s", resourceGroup, files.Account, files.ShareName),
		Attributes:   pulumi.StringMap{"shareName": files.ShareName},
		SecretData: pulumi.ToSecret(pulumi.StringMap{
			"azurestorageaccountname": files.Account,
			"azurestorageaccountkey":  files.Key,
		}).(pulumi.StringMapOutput),
	}
	return a
}

// mountExisting makes the shared volume a CSI volume of the existing share: without a key for an
// NFS share, with the account key (a secret from the config on: in the Secret's data, the state
// and nowhere else) for an SMB one.
func mountExisting(c *stacks.Config, a *storage.Args) {
	s := c.Storage
	a.InCluster = false
	if s.Protocol == AzureFilesNFS {
		a.MountOptions = aks.NFSMountOptions
		a.CSI = &storage.CSI{
			Driver:       storage.AzureFilesDriver,
			VolumeHandle: pulumi.Sprintf("%s_%s", s.Account, s.Share),
			Attributes: pulumi.StringMap{
				"resourceGroup": pulumi.String(s.ResourceGroup), "storageAccount": pulumi.String(s.Account),
				"shareName": pulumi.String(s.Share), "protocol": pulumi.String("nfs"),
			},
		}
		return
	}
	a.MountOptions = aks.MountOptions
	a.CSI = &storage.CSI{
		Driver:       storage.AzureFilesDriver,
		VolumeHandle: pulumi.Sprintf("%s#%s#%s", s.ResourceGroup, s.Account, s.Share),
		Attributes:   pulumi.StringMap{"shareName": pulumi.String(s.Share)},
		SecretData: pulumi.ToSecret(pulumi.StringMap{
			"azurestorageaccountname": pulumi.String(s.Account),
			"azurestorageaccountkey":  pulumi.String(c.StorageAccountKey.Reveal()),
		}).(pulumi.StringMapOutput),
	}
}
