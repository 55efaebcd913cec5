package stacks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/cloud/aks"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
)

// The clouds' own file stores: Filestore on gcp, EFS on aws, Azure Files on azure. Their
// settings' defaults and checks are here, each branch of kolotoc:storage.type in one place; the
// clouds create them (clouds.go) when the selected store is their own (store.cloudStore) and hand
// back how the volume reaches them (cloudVolume).

// cloudVolume is how the shared volume reaches the file store a cloud made: what the storage's
// Args take from it (storageArgs), instead of the in-cluster server.
type cloudVolume struct {
	serverAddress pulumi.StringInput // the NFS server's address (Filestore)
	path          string             // the exported path; "" keeps storage.path
	mountOptions  []string
	csi           *storage.CSI // a CSI volume (EFS, Azure Files) instead of NFS
	volumeDeps    []pulumi.Resource
}

// applyCloudStoreDefaults fills the cloud file stores' settings: tier, size, zone, account and
// share, the Azure Files protocol, the Filestore client ranges and the share's backup retention.
// applyCloudDefaults calls it last, when the cluster's network is defaulted. Zero values only.
func (c *Config) applyCloudStoreDefaults() {
	s := &c.Storage
	switch s.Type {
	case storage.TypeFilestore:
		meta.Fill(&s.Tier, defaultFilestoreTier)
		if s.Size == "" {
			if min, ok := filestoreMinGiB[s.Tier]; ok {
				s.Size = fmt.Sprintf("%dGi", min)
			}
		}
		if s.Zone == "" && s.Tier != FilestoreRegional {
			s.Zone = c.Cluster.Zone
			if s.Zone == "" {
				if p := c.towersPool(); p != nil && len(p.Zones) > 0 {
					s.Zone = p.Zones[0]
				}
			}
		}
	case storage.TypeEFS:
		if s.Tier == "" && s.FileSystemID == "" { // an existing file system's throughput is its own
			s.Tier = defaultEFSThroughput
		}
		if s.FileSystemID == "" {
			meta.Fill(&s.PerformanceMode, EFSGeneralPurpose)
		}
	case storage.TypeAzureFiles:
		if s.Share != "" {
			break // an existing share: its account, tier and protocol are named, never derived
		}
		meta.Fill(&s.Tier, defaultAzureFilesTier)
		meta.Fill(&s.Account, defaultStorageAccount(c.Project, c.Stack, c.Cluster.Name))
		meta.Fill(&s.ShareName, defaultAzureShareName)
	}
	// The Azure Files protocol: NFS, which needs no key and no public network, wherever it can
	// run (a subnet of the user's own, for the storage firewall to name); SMB otherwise, as before
	// the key existed. An existing share's protocol is named (storage_existing.go).
	if s.Type == storage.TypeAzureFiles && s.Protocol == "" && s.Share == "" {
		s.Protocol = AzureFilesSMB
		if c.Cluster.SubnetID != "" {
			s.Protocol = AzureFilesNFS
		}
	}
	// On GCP's default (auto mode) network the nodes' range is known: Filestore answers it.
	if c.Cloud == CloudGCP && s.Type == storage.TypeFilestore && len(s.ClientRanges) == 0 && c.Cluster.Network == defaultGCPNetwork {
		s.ClientRanges = []string{gcpAutoModeRange}
	}
	if b := &s.Backup; b.Enabled && s.Type == storage.TypeAzureFiles {
		meta.Fill(&b.RetentionDays, defaultShareRetentionDays)
	}
}

// storageCloud is the cloud a storage type belongs to, or "" for the cloud-independent ones.
func storageCloud(t string) string {
	switch t {
	case storage.TypeFilestore:
		return CloudGCP
	case storage.TypeEFS:
		return CloudAWS
	case storage.TypeAzureFiles:
		return CloudAzure
	}
	return ""
}

func (c *Config) validateCloudStorage(v *Validator) {
	s := c.Storage
	if want := storageCloud(s.Type); want != "" && want != c.Cloud && c.Cloud != CloudSimulated && c.Cloud != "" && !c.mountsExistingStore() {
		v.add("storage.type", s.Type, fmt.Sprintf("needs cloud %s (a simulated stack stands it in with an in-cluster NFS server); allowed on %s: %s",
			want, c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	}
	if s.Type == storage.TypeLocal && IsCloud(c.Cloud) {
		v.add("storage.type", s.Type, fmt.Sprintf("a directory of one node, for the local cluster or an existing one-node cluster; allowed on %s: %s",
			c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	}
	size, sizeErr := resource.ParseQuantity(s.Size)
	gib := (size.Value() + (1<<30 - 1)) >> 30 // rounded up
	switch s.Type {
	case storage.TypeFilestore:
		v.oneOf("storage.tier", s.Tier, allowedFilestoreTiers)
		if min, ok := filestoreMinGiB[s.Tier]; ok && sizeErr == nil {
			if gib < min || gib > filestoreMaxGiB[s.Tier] {
				v.add("storage.size", s.Size, fmt.Sprintf("Filestore tier %s holds %dGi to %dGi; allowed: %dGi..%dGi (or leave storage.size unset for %dGi)",
					s.Tier, min, filestoreMaxGiB[s.Tier], min, filestoreMaxGiB[s.Tier], min))
			}
		}
		if s.Tier != FilestoreRegional && c.Cloud == CloudGCP {
			if s.Zone == "" {
				v.add("storage.zone", "(unset)", "required for a zonal Filestore tier with a regional cluster and no zones on the towers' pool; e.g. "+c.Cluster.Region+"-a")
			} else if c.Cluster.Region != "" && !strings.HasPrefix(s.Zone, c.Cluster.Region+"-") {
				v.add("storage.zone", s.Zone, fmt.Sprintf("not a zone of region %s; allowed: %s-a, %s-b, …", c.Cluster.Region, c.Cluster.Region, c.Cluster.Region))
			}
		}
	case storage.TypeEFS:
		if s.FileSystemID == "" {
			v.oneOf("storage.tier", s.Tier, allowedEFSThroughput)
			v.oneOf("storage.performanceMode", s.PerformanceMode, allowedEFSPerformance)
			// "Max I/O performance mode is not supported ... with Elastic throughput" (Amazon EFS
			// User Guide, Performance modes: https://docs.aws.amazon.com/efs/latest/ug/performance.html#performancemodes).
			if s.PerformanceMode == EFSMaxIO && s.Tier == EFSElastic {
				v.add("storage.performanceMode", s.PerformanceMode, "EFS does not offer Max I/O with elastic throughput; allowed with storage.tier elastic: generalPurpose (or set storage.tier bursting or provisioned)")
			}
			switch {
			case s.Tier == EFSProvisioned && (s.ThroughputMibps < 1 || s.ThroughputMibps > efsMaxProvisionedMibps):
				v.add("storage.throughputMibps", strconv.Itoa(s.ThroughputMibps), fmt.Sprintf("required with storage.tier provisioned: MiB/s; allowed: 1..%d", efsMaxProvisionedMibps))
			case s.Tier != EFSProvisioned && s.ThroughputMibps != 0:
				v.add("storage.throughputMibps", strconv.Itoa(s.ThroughputMibps), "only with storage.tier provisioned")
			}
		} else if s.PerformanceMode != "" || s.ThroughputMibps != 0 {
			v.add("storage.performanceMode", meta.OrUnset(s.PerformanceMode), "an existing file system (storage.fileSystemId) keeps its own modes; leave storage.performanceMode and storage.throughputMibps unset")
		}
	case storage.TypeAzureFiles:
		if s.Share != "" {
			break // an existing share (validateExistingStorage)
		}
		v.oneOf("storage.tier", s.Tier, allowedAzureFilesTiers)
		if min, ok := azureFilesMinGiB[s.Tier]; ok && sizeErr == nil && (gib < min || gib > azureFilesMaxGiB) {
			v.add("storage.size", s.Size, fmt.Sprintf("an Azure Files %s share holds %dGi to %dGi; allowed: %dGi..%dGi", s.Tier, min, azureFilesMaxGiB, min, azureFilesMaxGiB))
		}
		// Share names: 3-63 lower-case letters, digits and single hyphens, starting and ending
		// with a letter or digit (the rule storage.share follows, storage_existing.go).
		if len(s.ShareName) < 3 || len(s.ShareName) > 63 || !azureShareName.MatchString(s.ShareName) {
			v.add("storage.shareName", s.ShareName, "Azure share names are 3-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit")
		}
		if !storageAccount.MatchString(s.Account) {
			v.add("storage.account", s.Account, "storage account names are 3-24 lower-case letters and digits (and unique across Azure); or leave it unset for a derived one")
		}
	default:
		if s.Tier != "" {
			v.add("storage.tier", s.Tier, "only for storage.type filestore, efs or azurefiles")
		}
	}
	if s.Type != storage.TypeEFS && (s.PerformanceMode != "" || s.ThroughputMibps != 0) {
		v.add("storage.performanceMode", meta.OrUnset(s.PerformanceMode), "storage.performanceMode and storage.throughputMibps are for storage.type efs")
	}
	if s.Type != storage.TypeAzureFiles && s.ShareName != "" {
		v.add("storage.shareName", s.ShareName, "only for storage.type azurefiles")
	} else if s.Type == storage.TypeAzureFiles && s.Share != "" && s.ShareName != "" {
		v.add("storage.shareName", s.ShareName, "names the share Kolotoc creates; with storage.share (an existing share) leave it unset")
	}
	c.validateExistingStorage(v)
}

// validateFilestoreAccess checks the Filestore client ranges (validateCloud calls it after
// validateAccess).
func (c *Config) validateFilestoreAccess(v *Validator) {
	k := c.Cluster
	s := c.Storage
	if s.Type != storage.TypeFilestore {
		if len(s.ClientRanges) > 0 {
			v.add("storage.clientRanges", strings.Join(s.ClientRanges, ","), "only for storage.type filestore")
		}
		return
	}
	if c.Cloud == CloudGCP && len(s.ClientRanges) == 0 {
		v.add("storage.clientRanges", "[]", fmt.Sprintf("required with cluster.network %s: the ranges of the cluster's nodes (its subnet's primary range), "+
			"which alone may mount the Filestore share; e.g. [10.10.0.0/20]", k.Network))
	}
	for i, cidr := range s.ClientRanges {
		v.CIDR(fmt.Sprintf("storage.clientRanges[%d]", i), cidr, "the ranges of the cluster's nodes, e.g. 10.128.0.0/9 on the default network")
	}
}

// validateAzureFilesNetwork checks what the Azure Files share asks of the network: its private
// endpoint and DNS zone, its protocol (validateCloud calls it after validateAzureNetwork).
func (c *Config) validateAzureFilesNetwork(v *Validator) {
	k, s := c.Cluster, c.Storage
	if s.PrivateDNSZoneID != "" && !s.PrivateEndpoint {
		v.add("storage.privateDnsZoneId", s.PrivateDNSZoneID, "only with storage.privateEndpoint: true")
	}
	if s.Type != storage.TypeAzureFiles || s.Share != "" {
		if s.PrivateEndpoint {
			v.add("storage.privateEndpoint", "true", "only for a share the stack creates (storage.type azurefiles without storage.share)")
		}
	}
	if s.Type != storage.TypeAzureFiles {
		if s.Protocol != "" {
			v.add("storage.protocol", s.Protocol, "only for storage.type azurefiles")
		}
		return
	}
	if s.Share != "" {
		return // an existing share: its protocol is checked with it (storage_existing.go)
	}
	if s.PrivateEndpoint && s.Protocol != AzureFilesNFS {
		v.add("storage.privateEndpoint", "true", "a private endpoint serves the NFS share (storage.protocol nfs, with cluster.subnetId); allowed with smb: false")
	}
	if z := s.PrivateDNSZoneID; z != "" && !privateFilesZoneID.MatchString(z) {
		v.add("storage.privateDnsZoneId", z, "allowed: the resource ID of a "+aks.FilesPrivateZone+" zone, "+
			"/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/privateDnsZones/"+aks.FilesPrivateZone)
	}
	v.oneOf("storage.protocol", s.Protocol, allowedAzureFilesProtocols)
	if s.Protocol != AzureFilesNFS {
		return
	}
	if k.SubnetID == "" {
		v.add("storage.protocol", s.Protocol, "an NFS share answers only a virtual network rule, and needs cluster.subnetId: "+
			"the subnet the cluster runs in, with the Microsoft.Storage service endpoint; allowed without it: smb (mounted with the account key)")
	}
	if s.Tier != AzureFilesPremium {
		v.add("storage.tier", s.Tier, "Azure Files serves NFS from Premium (FileStorage) accounts only; allowed with storage.protocol nfs: Premium "+
			"(or storage.protocol smb)")
	}
}

// validateBackup: backups are for the file stores Kolotoc creates and can back up.
func (c *Config) validateBackup(v *Validator) {
	s := c.Storage
	b := s.Backup
	if !b.Enabled {
		if b.RetentionDays != 0 {
			v.add("storage.backup.retentionDays", strconv.Itoa(b.RetentionDays), "only with storage.backup.enabled: true")
		}
		return
	}
	existing := s.FileSystemID != "" || s.Share != ""
	switch {
	case s.Type == storage.TypeFilestore:
		v.add("storage.backup.enabled", "true", "Kolotoc cannot schedule Filestore backups: pulumi-gcp v7 declares one-off backups only, "+
			"and a backup taken at each `pulumi up` is not a schedule (docs/recovery.md says how to schedule them); allowed with storage.type filestore: false")
	case s.Type != storage.TypeEFS && s.Type != storage.TypeAzureFiles:
		v.add("storage.backup.enabled", "true", fmt.Sprintf("storage.type %s is not a file store Kolotoc creates on a cloud; allowed: false "+
			"(or storage.type efs or azurefiles)", s.Type))
	case existing:
		v.add("storage.backup.enabled", "true", "the existing store (storage.fileSystemId or storage.share) is not Kolotoc's: its backups are its owner's; allowed with it: false")
	case s.Type == storage.TypeEFS && b.RetentionDays != 0:
		v.add("storage.backup.retentionDays", strconv.Itoa(b.RetentionDays),
			"EFS automatic backups keep AWS Backup's default plan (daily, kept 35 days); allowed with storage.type efs: unset")
	case s.Type == storage.TypeAzureFiles && (b.RetentionDays < 1 || b.RetentionDays > maxShareRetentionDays):
		v.add("storage.backup.retentionDays", strconv.Itoa(b.RetentionDays), fmt.Sprintf("allowed: 1..%d (days a deleted share is kept)", maxShareRetentionDays))
	}
}

// backupDays is the Azure Files share soft delete retention (days), 0 without a backup.
func backupDays(s storage.Config) int {
	if !s.Backup.Enabled {
		return 0
	}
	return s.Backup.RetentionDays
}

// azureFilesVolume is how the shared volume reaches the Azure Files share, through the Azure Files
// CSI driver. An NFS share needs nothing secret: it answers the cluster's subnet and asks for no
// key. An SMB share is mounted with the account key, which goes into a Kubernetes Secret.
func azureFilesVolume(files *aks.Files, resourceGroup pulumi.StringOutput, nfs bool) *cloudVolume {
	a := &cloudVolume{}
	// With a private endpoint, the volume waits for the share's private DNS records, so that
	// no node mounts it through a name that still points at the closed public endpoint.
	a.volumeDeps = files.Ready
	if nfs {
		a.mountOptions = aks.NFSMountOptions
		a.csi = &storage.CSI{
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
	a.mountOptions = aks.MountOptions
	a.csi = &storage.CSI{
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
