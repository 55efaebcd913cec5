package stacks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/storage"
)

// The clouds' own file stores: Filestore on gcp, EFS on aws, Azure Files on azure, each declared
// by its cloud's entry (Cloud.Store: its storage.type, defaults, checks, identity, how an existing
// one is mounted). The clouds create them (their entry's Deploy) when the selected store is their
// own (store.cloudStore) and hand back how the volume reaches them (CloudVolume).

// CloudVolume is how the shared volume reaches the file store a cloud made: what the storage's
// Args take from it (StorageArgs), instead of the in-cluster server.
type CloudVolume struct {
	ServerAddress pulumi.StringInput // the NFS server's address (Filestore)
	Path          string             // the exported path; "" keeps storage.path
	MountOptions  []string
	CSI           *storage.CSI // a CSI volume (EFS, Azure Files) instead of NFS
	VolumeDeps    []pulumi.Resource
}

// CloudStore reports whether the shared store is the stack's cloud's own file store (store).
func (c *Config) CloudStore() bool { return c.store().cloudStore }

// validateCloudStorage checks that a cloud's file store runs on its cloud (or in the simulated
// cloud's stand-in, or as an existing store an existing cluster mounts), then each file store's
// settings (its Store's Check, on every stack: its keys are refused with another type).
func (c *Config) validateCloudStorage(v *Validator) {
	s := c.Storage
	on := c.CloudEntry()
	if want := storeCloud(s.Type); want != nil && want.Name != c.Cloud && !on.Local && c.Cloud != "" && !c.mountsExistingStore() {
		v.add("storage.type", s.Type, fmt.Sprintf("needs cloud %s (a simulated stack stands it in with an in-cluster NFS server); allowed on %s: %s",
			want.Name, c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	}
	if s.Type == storage.TypeLocal && on.Creates {
		v.add("storage.type", s.Type, fmt.Sprintf("a directory of one node, for the local cluster or an existing one-node cluster; allowed on %s: %s",
			c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	}
	if storeCloud(s.Type) == nil && s.Tier != "" {
		v.add("storage.tier", s.Tier, "only for storage.type "+orList(cloudStoreTypes()))
	}
	for _, st := range cloudStores() {
		if st.Check != nil {
			st.Check(c, v)
		}
	}
	c.validateExistingStorage(v)
}

// cloudStoreTypes are the storage types of the clouds' file stores.
func cloudStoreTypes() []string {
	var out []string
	for _, st := range cloudStores() {
		out = append(out, st.Type)
	}
	return out
}

// orList writes a, b or c.
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// validateBackup: backups are for the file stores Kolotoc creates and can back up (a Store with
// Backup, which checks the rest).
func (c *Config) validateBackup(v *Validator) {
	s := c.Storage
	b := s.Backup
	if !b.Enabled {
		if b.RetentionDays != 0 {
			v.add("storage.backup.retentionDays", strconv.Itoa(b.RetentionDays), "only with storage.backup.enabled: true")
		}
		return
	}
	var backed []string
	existing := false
	for _, st := range cloudStores() {
		if st.Backup != nil {
			backed = append(backed, st.Type)
		}
		existing = existing || st.Existing != nil && st.Existing(s)
	}
	var st *Store
	if cl := storeCloud(s.Type); cl != nil {
		st = cl.Store
	}
	switch {
	case st != nil && st.NoBackup != "":
		v.add("storage.backup.enabled", "true", st.NoBackup)
	case st == nil || st.Backup == nil:
		v.add("storage.backup.enabled", "true", fmt.Sprintf("storage.type %s is not a file store Kolotoc creates on a cloud; allowed: false "+
			"(or storage.type %s)", s.Type, orList(backed)))
	case existing:
		v.add("storage.backup.enabled", "true", "the existing store (storage.fileSystemId or storage.share) is not Kolotoc's: its backups are its owner's; allowed with it: false")
	default:
		st.Backup(c, v)
	}
}
