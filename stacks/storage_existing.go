package stacks

import (
	"fmt"
	"regexp"
	"strings"

	"kolotoc/components/storage"
)

// Existing stores: an NFS export (storage.type nfs), or a cloud's file store that exists already
// (an EFS file system, storage.fileSystemId; an Azure Files share, storage.share: their Store's
// Existing), that the stack mounts and never creates, changes or deletes. On aws and azure the
// cluster still gets the CSI driver that mounts it (EKS's EFS add-on; AKS has Azure Files built
// in); on an existing cluster the driver must be there.

// mountOption: one NFS mount option, name or name=value, no separators.
var mountOption = regexp.MustCompile(`^[a-z0-9_]+(=[A-Za-z0-9_.:/-]+)?$`)

// existingStoreTypes are the cloud file stores an existing cluster can mount, for the errors.
func existingStoreTypes() []string {
	var out []string
	for _, st := range cloudStores() {
		if st.ExistingHint != "" {
			out = append(out, st.ExistingHint)
		}
	}
	return out
}

// mountsExistingStore reports whether an existing cluster mounts an existing cloud file store,
// which it may whatever cloud the store lives in, the CSI driver being the cluster's.
func (c *Config) mountsExistingStore() bool {
	st := storeCloud(c.Storage.Type)
	return c.CloudEntry().Given() && st != nil && st.Store.Existing != nil && st.Store.Existing(c.Storage)
}

// validateExistingStorage checks the NFS export's mount options (each cloud's Store checks its
// own existing store's keys).
func (c *Config) validateExistingStorage(v *Validator) {
	s := c.Storage
	if s.Type != storage.TypeNFS && len(s.MountOptions) > 0 {
		v.add("storage.mountOptions", strings.Join(s.MountOptions, ","), "only for storage.type nfs (the cloud file stores' options are Kolotoc's)")
	}
	for i, o := range s.MountOptions {
		if !mountOption.MatchString(o) {
			v.add(fmt.Sprintf("storage.mountOptions[%d]", i), o, "not one NFS mount option; allowed: a name or name=value each, e.g. [nfsvers=3, hard]")
		}
	}
}

// applyExistingStorage points the shared volume at an existing store, on any cluster that mounts
// it for real (not the simulated cloud, whose in-cluster NFS server stands in for a cloud file
// store): an external NFS export keeps its server, path and mount options; an existing cloud file
// store becomes a CSI volume (its Store's Mount). Every one of them is kept when released
// (Retain).
func applyExistingStorage(c *Config, a *storage.Args) {
	if c.InClusterNFS() || !c.ExistingStore() {
		return
	}
	s := c.Storage
	a.External = true
	if s.Type == storage.TypeNFS {
		a.MountOptions = s.MountOptions
	} else if st := storeCloud(s.Type); st != nil && st.Store.Mount != nil {
		st.Store.Mount(c, a)
	}
}
