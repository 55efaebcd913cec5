package stacks

import (
	"fmt"
	"regexp"
	"strconv"

	"kolotoc/components/meta"
	"kolotoc/components/storage"
)

// How a cloud pool is replaced (`kolotoc:nodePools[i].replace`).
const (
	// ReplaceCreateFirst: the new pool is created (under a new generated name) before the old one
	// is deleted. A GPU pool keeps its GPUs through a replacement, and a stockout fails the
	// creation while the old pool runs on; it needs quota for both pools at once.
	ReplaceCreateFirst = "createFirst"
	// ReplaceDeleteFirst: the old pool is deleted first, as every pool was before generated
	// names: quota for one pool, no nodes in between. The only way with a pinned cloudName.
	ReplaceDeleteFirst = "deleteFirst"
)

// Backup retention of the stores that take one (`kolotoc:storage.backup.retentionDays`).
const (
	// defaultShareRetentionDays: Azure's own default for share soft delete when the portal turns
	// it on (days): a week to notice a deleted share.
	defaultShareRetentionDays = 7
	// maxShareRetentionDays: the longest share soft delete Azure keeps (days): Azure Files,
	// "Enable soft delete on Azure file shares", https://learn.microsoft.com/en-us/azure/storage/files/storage-files-enable-soft-delete
	maxShareRetentionDays = 365
)

var (
	allowedReplace = []string{ReplaceCreateFirst, ReplaceDeleteFirst}

	// Pool names as each cloud takes them, for a pinned cloudName. GKE: lower-case letters,
	// digits and '-', starting with a letter, at most 40 (the node pool API's name rule); EKS:
	// letters, digits, '-' and '_', starting with a letter or digit, at most 63 (CreateNodegroup's
	// nodegroupName); AKS: aksPoolName.
	gkePoolName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)
	eksPoolName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,62}$`)
)

// applyRecoveryDefaults fills how each pool is replaced and the backup retention. Zero values
// only.
func (c *Config) applyRecoveryDefaults() {
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if p.CloudName != "" {
			meta.Fill(&p.Replace, ReplaceDeleteFirst)
		}
		meta.Fill(&p.Replace, ReplaceCreateFirst)
	}
	if b := &c.Storage.Backup; b.Enabled && c.Storage.Type == storage.TypeAzureFiles {
		meta.Fill(&b.RetentionDays, defaultShareRetentionDays)
	}
}

// validateRecovery checks the pools' cloud names and replacement, and the store's backup.
func (c *Config) validateRecovery(v *validator) {
	seen := map[string]int{}
	for i, p := range c.NodePools {
		key := fmt.Sprintf("nodePools[%d]", i)
		v.oneOf(key+".replace", p.Replace, allowedReplace)
		if p.CloudName == "" {
			continue
		}
		if p.Replace == ReplaceCreateFirst {
			v.add(key+".replace", p.Replace, fmt.Sprintf("the pinned cloudName %q cannot exist twice, so the new pool cannot be created beside the old one; "+
				"allowed with cloudName: %s (or leave cloudName unset for a generated name)", p.CloudName, ReplaceDeleteFirst))
		}
		if j, dup := seen[p.CloudName]; dup {
			v.add(key+".cloudName", p.CloudName, fmt.Sprintf("duplicate: nodePools[%d] has it; allowed: a name no other pool has", j))
		}
		seen[p.CloudName] = i
		switch c.Cloud {
		case CloudGCP:
			if !gkePoolName.MatchString(p.CloudName) {
				v.add(key+".cloudName", p.CloudName, fmt.Sprintf("not a GKE node pool name; allowed: 1-%d lower-case letters, digits and '-', starting with a letter and not ending with '-'", gkeNameMax))
			}
		case CloudAWS:
			if !eksPoolName.MatchString(p.CloudName) {
				v.add(key+".cloudName", p.CloudName, "not an EKS node group name; allowed: 1-63 letters, digits, '-' and '_', starting with a letter or digit")
			}
		case CloudAzure:
			if !aksPoolName.MatchString(p.CloudName) || p.CloudName == AKSSystemPool {
				v.add(key+".cloudName", p.CloudName, fmt.Sprintf("not an AKS agent pool name; allowed: 1-%d lower-case letters and digits starting with a letter, not %q",
					aksPoolNameMax, AKSSystemPool))
			}
		}
	}
	c.validateBackup(v)
}

// validateBackup: backups are for the file stores Kolotoc creates and can back up.
func (c *Config) validateBackup(v *validator) {
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
