package stacks

import (
	"fmt"
	"regexp"

	"kolotoc/components/meta"
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
}

// validateRecovery checks the pools' cloud names and replacement, and the store's backup.
func (c *Config) validateRecovery(v *Validator) {
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
}
