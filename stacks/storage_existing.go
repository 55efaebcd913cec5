package stacks

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/aks"
	"kolotoc/components/storage"
)

// Existing stores: an EFS file system (storage.fileSystemId), an Azure Files share
// (storage.share) or an NFS export (storage.type nfs) that the stack mounts and never creates,
// changes or deletes. On aws and azure the cluster still gets the CSI driver that mounts it (EKS's
// EFS add-on; AKS has Azure Files built in); on an existing cluster the driver must be there.

// existingStoreTypes are the cloud file stores an existing cluster can mount, for the errors.
var existingStoreTypes = []string{storage.TypeEFS + " (with storage.fileSystemId)", storage.TypeAzureFiles + " (with storage.share)"}

var (
	// efsFileSystemID: fs- and 8 (older) or 17 hexadecimal digits.
	efsFileSystemID = regexp.MustCompile(`^fs-([0-9a-f]{8}|[0-9a-f]{17})$`)
	// efsAccessPointID: fsap- and 17 hexadecimal digits.
	efsAccessPointID = regexp.MustCompile(`^fsap-[0-9a-f]{17}$`)
	// azureShareName: 3-63 lower-case letters, digits and single hyphens, starting and ending with
	// a letter or digit (length checked apart).
	azureShareName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// azureResourceGroupPattern: 1-90 letters, digits, '-', '_', '.', '(' and ')', not ending with '.'.
	azureResourceGroupPattern = regexp.MustCompile(`^[-\w.()]{0,89}[-\w()]$`)
	// mountOption: one NFS mount option, name or name=value, no separators.
	mountOption = regexp.MustCompile(`^[a-z0-9_]+(=[A-Za-z0-9_.:/-]+)?$`)
)

// mountsExistingStore reports whether an existing cluster mounts an existing cloud file store,
// which it may whatever cloud the store lives in, the CSI driver being the cluster's.
func (c *Config) mountsExistingStore() bool {
	s := c.Storage
	return c.Cloud == CloudExisting && ((s.Type == storage.TypeEFS && s.FileSystemID != "") || (s.Type == storage.TypeAzureFiles && s.Share != ""))
}

// validateExistingStorage checks the keys of existing stores: each only with its type, well
// formed, with what it needs, and no setting that only a created store has.
func (c *Config) validateExistingStorage(v *Validator) {
	s := c.Storage
	only := func(key, value, typ string) {
		if value != "" {
			v.add(key, value, "only for storage.type "+typ)
		}
	}
	if s.Type != storage.TypeEFS {
		only("storage.fileSystemId", s.FileSystemID, storage.TypeEFS)
		only("storage.accessPointId", s.AccessPointID, storage.TypeEFS+" with storage.fileSystemId")
	}
	if s.Type != storage.TypeAzureFiles {
		only("storage.share", s.Share, storage.TypeAzureFiles)
		only("storage.resourceGroup", s.ResourceGroup, storage.TypeAzureFiles+" with storage.share")
	}
	if s.Type != storage.TypeNFS && len(s.MountOptions) > 0 {
		v.add("storage.mountOptions", strings.Join(s.MountOptions, ","), "only for storage.type nfs (the cloud file stores' options are Kolotoc's)")
	}
	for i, o := range s.MountOptions {
		if !mountOption.MatchString(o) {
			v.add(fmt.Sprintf("storage.mountOptions[%d]", i), o, "not one NFS mount option; allowed: a name or name=value each, e.g. [nfsvers=3, hard]")
		}
	}
	switch s.Type {
	case storage.TypeEFS:
		c.validateExistingEFS(v)
	case storage.TypeAzureFiles:
		c.validateExistingShare(v)
	}
	if c.StorageAccountKey.IsSet() && !(s.Type == storage.TypeAzureFiles && s.Share != "" && s.Protocol == AzureFilesSMB) {
		v.add("storageAccountKey", "[secret]", "only for an existing SMB share (storage.type azurefiles with storage.share and "+
			"storage.protocol smb), which is mounted with it; without storage.share Kolotoc creates the account and reads its key itself; remove it")
	}
}

func (c *Config) validateExistingEFS(v *Validator) {
	s := c.Storage
	switch {
	case s.FileSystemID == "" && s.AccessPointID != "":
		v.add("storage.accessPointId", s.AccessPointID, "needs storage.fileSystemId: the existing file system the access point belongs to")
	case s.FileSystemID == "" && c.Cloud == CloudExisting:
		v.add("storage.fileSystemId", "(unset)", "required with storage.type efs on cloud existing: Kolotoc creates no file system there; "+
			"name yours, e.g. fs-0123456789abcdef0 (the cluster needs the EFS CSI driver)")
	}
	if s.FileSystemID == "" {
		return
	}
	if !efsFileSystemID.MatchString(s.FileSystemID) {
		v.add("storage.fileSystemId", s.FileSystemID, "not an EFS file system ID; allowed: fs- and 8 or 17 hexadecimal digits, e.g. fs-0123456789abcdef0 "+
			"(aws efs describe-file-systems --query 'FileSystems[].FileSystemId')")
	}
	if s.AccessPointID != "" && !efsAccessPointID.MatchString(s.AccessPointID) {
		v.add("storage.accessPointId", s.AccessPointID, "not an EFS access point ID; allowed: fsap- and 17 hexadecimal digits, e.g. fsap-0123456789abcdef0")
	}
	if s.Tier != "" {
		v.add("storage.tier", s.Tier, "an existing file system keeps its own throughput mode; remove it (or storage.fileSystemId, to create one)")
	}
}

func (c *Config) validateExistingShare(v *Validator) {
	s := c.Storage
	if s.Share == "" {
		if s.ResourceGroup != "" {
			v.add("storage.resourceGroup", s.ResourceGroup, "only with storage.share: the resource group of an existing share's account "+
				"(a created account lives in the stack's own)")
		}
		if c.Cloud == CloudExisting {
			v.add("storage.share", "(unset)", "required with storage.type azurefiles on cloud existing: Kolotoc creates no storage account there; "+
				"name your share, its storage.account and storage.resourceGroup")
		}
		return
	}
	if len(s.Share) < 3 || len(s.Share) > 63 || !azureShareName.MatchString(s.Share) {
		v.add("storage.share", s.Share, "not an Azure Files share name; allowed: 3-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit")
	}
	switch {
	case s.Account == "":
		v.add("storage.account", "(unset)", "required with storage.share: the existing storage account the share is in")
	case !storageAccount.MatchString(s.Account):
		v.add("storage.account", s.Account, "storage account names are 3-24 lower-case letters and digits")
	}
	switch {
	case s.ResourceGroup == "":
		v.add("storage.resourceGroup", "(unset)", "required with storage.share: the resource group of storage.account "+
			"(az storage account show -n <account> --query resourceGroup)")
	case !azureResourceGroupPattern.MatchString(s.ResourceGroup):
		v.add("storage.resourceGroup", s.ResourceGroup, "not a resource group name; allowed: 1-90 letters, digits, '-', '_', '.', '(' and ')', not ending with '.'")
	}
	if s.Tier != "" {
		v.add("storage.tier", s.Tier, "an existing share keeps its account's tier; remove it (or storage.share, to create one)")
	}
	switch s.Protocol {
	case "":
		v.add("storage.protocol", "(unset)", "required with storage.share: the existing share's protocol; allowed: nfs (mounted without a key), "+
			"smb (mounted with kolotoc:storageAccountKey)")
	case AzureFilesSMB:
		if !c.StorageAccountKey.IsSet() && c.Cloud != CloudSimulated {
			v.add("storageAccountKey", "(unset)", "required with an existing SMB share: its account's key, which the CSI driver mounts with; "+
				"run `az storage account keys list -n "+s.Account+" --query '[0].value' -o tsv | pulumi config set --secret kolotoc:storageAccountKey`")
		}
	case AzureFilesNFS:
	default:
		v.oneOf("storage.protocol", s.Protocol, allowedAzureFilesProtocols)
	}
}

// existingStoreIdentity adds, to the storage's identity (StorageIdentity, storage.go), the keys that name an existing
// store: another file system, access point, subdirectory or share is another volume. Absent keys
// are left out, so the identity of a created store is what it was.
func existingStoreIdentity(c *Config, id map[string]string) {
	s := c.Storage
	switch {
	case s.Type == storage.TypeEFS && s.FileSystemID != "":
		id["storage.fileSystemId"], id["storage.path"] = s.FileSystemID, s.Path
		if s.AccessPointID != "" {
			id["storage.accessPointId"] = s.AccessPointID
		}
	case s.Type == storage.TypeAzureFiles && s.Share != "":
		id["storage.share"], id["storage.resourceGroup"] = s.Share, s.ResourceGroup
	}
}

// applyExistingStorage points the shared volume at an existing store, on any cluster that mounts
// it for real (not the simulated cloud, whose in-cluster NFS server stands in for a cloud file
// store): an external NFS export keeps its server, path and mount options; an EFS file system
// or Azure Files share becomes a CSI volume. Every one of them is kept when released (Retain).
func applyExistingStorage(c *Config, a *storage.Args) {
	if c.InClusterNFS() || !c.ExistingStore() {
		return
	}
	s := c.Storage
	a.External = true
	switch s.Type {
	case storage.TypeNFS:
		a.MountOptions = s.MountOptions
	case storage.TypeEFS:
		a.InCluster = false
		a.MountOptions = []string{"tls"} // efs-utils encrypts NFS in transit (and access points need it)
		a.CSI = &storage.CSI{Driver: storage.EFSDriver, VolumeHandle: pulumi.String(EFSVolumeHandle(s))}
	case storage.TypeAzureFiles:
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
			// The key is a secret from the config on: in the Secret's data, the state and nowhere else.
			SecretData: pulumi.ToSecret(pulumi.StringMap{
				"azurestorageaccountname": pulumi.String(s.Account),
				"azurestorageaccountkey":  pulumi.String(c.StorageAccountKey.Reveal()),
			}).(pulumi.StringMapOutput),
		}
	}
}

// EFSVolumeHandle is the EFS CSI driver's handle of an existing file system:
// <fileSystemId>[:<subdirectory>][:<accessPointId>] (storage.path as the subdirectory, relative to
// the access point's root when there is one; "/" is the root).
func EFSVolumeHandle(s storage.Config) string {
	path := s.Path
	if path == "/" {
		path = ""
	}
	switch {
	case s.AccessPointID != "":
		return s.FileSystemID + ":" + path + ":" + s.AccessPointID
	case path != "":
		return s.FileSystemID + ":" + path
	}
	return s.FileSystemID
}
