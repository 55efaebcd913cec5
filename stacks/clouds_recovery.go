package stacks

import (
	"fmt"

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

var allowedReplace = []string{ReplaceCreateFirst, ReplaceDeleteFirst}

// applyRecoveryDefaults fills how each pool is replaced. Zero values only.
func (c *Config) applyRecoveryDefaults() {
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if p.CloudName != "" {
			meta.Fill(&p.Replace, ReplaceDeleteFirst)
		}
		meta.Fill(&p.Replace, ReplaceCreateFirst)
	}
}

// validateRecovery checks the pools' replacement and that no two pin one cloud name (each
// cloud's entry checks the names as it takes them).
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
	}
}
