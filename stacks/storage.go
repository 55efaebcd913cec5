package stacks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
	"kolotoc/components/storage"
)

// StorageName names the shared ReadWriteMany claim every workload mounts.
const StorageName = "shared"

// localStorageRoot: storage.type local keeps a stack's shared directory under
// <root>/<namespace>/shared on the node, one directory per stack.
const localStorageRoot = "/var/lib/kolotoc"

// store is the shared store as the stack selects it from kolotoc:storage.type, the cloud and an
// existing store's keys (Config.store, the one place that reads the type for the rest): what the
// other files ask of it instead of the type.
type store struct {
	// inCluster: an NFS server in the namespace, asked for, or in place of a cloud file store on
	// the simulated cloud (so a simulated copy of a cloud stack runs with the same storage keys).
	inCluster bool
	// existing: a store the stack mounts but does not own (an external NFS export, an existing
	// EFS file system or Azure Files share); its volume keeps it (Retain) whatever happens.
	existing bool
	// cloudStore: the store is the stack's cloud's own file store (Filestore on gcp, EFS on aws,
	// Azure Files on azure): the cloud makes it, or for an existing one installs what mounts it.
	cloudStore bool
	// hostPath: a directory of the node (storage.type local), the volume's instead of NFS.
	hostPath string
}

// store selects the shared store.
func (c *Config) store() store {
	s := c.Storage
	owner := storeCloud(s.Type) // the cloud whose file store the type is, nil for none
	st := store{
		inCluster:  s.Type == storage.TypeInClusterNFS || (c.CloudEntry().Local && owner != nil),
		existing:   s.Type == storage.TypeNFS || (owner != nil && owner.Store.Existing != nil && owner.Store.Existing(s)),
		cloudStore: owner != nil && owner.Name == c.Cloud,
	}
	if s.Type == storage.TypeLocal {
		st.hostPath = s.Path
	}
	return st
}

// InClusterNFS reports whether the shared storage is an NFS server inside the namespace (store).
func (c *Config) InClusterNFS() bool { return c.store().inCluster }

// ExistingStore reports whether the shared storage is a store the stack mounts but does not own
// (store).
func (c *Config) ExistingStore() bool { return c.store().existing }

// StorageArgs are the storage's Args: the claim and what backs it, as the store selected (an
// in-cluster server, an NFS export, a node's directory, the cloud's file store through vol, an
// existing store) and what its own pods wait for.
func StorageArgs(c *Config, namespace pulumi.StringInput, labels meta.Labels, vol *CloudVolume, podDeps []pulumi.Resource) *storage.Args {
	s, st := c.Storage, c.store()
	a := &storage.Args{
		Namespace: namespace, NamespaceDNS: c.Namespace, VolumeName: storage.VolumeName(c.Namespace, StorageName), ClaimName: StorageName,
		InCluster: st.inCluster, Server: s.Server, Path: s.Path, Size: s.Size,
		ServerImage: s.Image, ServerPool: c.Entrypoint.Pool, Protect: s.Protect, Labels: labels,
		Owner: c.storageOwner(), HostPath: st.hostPath,
	}
	if vol != nil { // Filestore, EFS or Azure Files on a cloud
		a.InCluster, a.ServerAddress, a.MountOptions, a.CSI, a.VolumeDeps = false, vol.ServerAddress, vol.MountOptions, vol.CSI, vol.VolumeDeps
		if vol.Path != "" {
			a.Path = vol.Path
		}
	}
	// An NFS export, EFS file system or Azure Files share the stack mounts and does not own.
	applyExistingStorage(c, a)
	a.PodDeps = podDeps
	return a
}

// applyStorageDefaults fills the store's type off the clouds, its path, and the storage's own.
func (c *Config) applyStorageDefaults() {
	s := &c.Storage
	if s.Type == "" && !c.CloudEntry().Creates {
		// On a cloud the type must be named (validateStorage): the in-cluster server's data
		// does not outlive its pod.
		s.Type = storage.TypeInClusterNFS
	}
	if s.Path == "" {
		s.Path = "/"
		if s.Type == storage.TypeLocal && c.Namespace != "" {
			s.Path = fmt.Sprintf("%s/%s/%s", localStorageRoot, c.Namespace, StorageName)
		}
	}
	s.Default() // the rest is the storage's own (components/storage/config.go)
}

// allowedStorage are the storage types a stack can name in kolotoc:storage.type: the
// cloud-independent ones, then the clouds' file stores.
func allowedStorage() []string {
	return append([]string{storage.TypeInClusterNFS, storage.TypeNFS, storage.TypeLocal}, cloudStoreTypes()...)
}

func (c *Config) validateStorage(v *Validator) {
	s := c.Storage
	switch creates := c.CloudEntry().Creates; {
	case creates && s.Type == "":
		v.add("storage.type", "(unset)", fmt.Sprintf("required on %s: the checkpoints need storage that outlives the pods; allowed on %s: %s",
			c.Cloud, c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	case creates && s.Type == storage.TypeInClusterNFS:
		v.add("storage.type", s.Type, fmt.Sprintf("keeps its data in the server pod's emptyDir: a node upgrade, an eviction or a "+
			"restart erases every checkpoint; allowed on %s: %s", c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	default:
		v.oneOf("storage.type", s.Type, allowedStorage())
	}
	s.Validate(v) // the storage's own settings (components/storage/config.go)
	if c.InClusterNFS() {
		v.Image("storage.image", s.Image)
	}
	v.Quantity("storage.size", s.Size)
	v.absPath("storage.path", s.Path)
	v.absPath("storage.mountPath", s.MountPath)
	v.oneOf("storage.scratch.type", s.Scratch.Type, storage.ScratchTypes)
	if s.Scratch.Path != "" {
		v.absPath("storage.scratch.path", s.Scratch.Path)
		v.nodeDir("storage.scratch.path", s.Scratch.Path)
	}
	if s.Type == storage.TypeLocal {
		v.nodeDir("storage.path", s.Path) // hostPath too
	}
	if s.Server != "" {
		v.host("storage.server", s.Server, "the NFS server's DNS name or IP address, without scheme, port or path, e.g. 10.0.0.2 or nfs.example.com")
	}
	v.Quantity("storage.scratch.sizeLimit", s.Scratch.SizeLimit)
	v.absPath("storage.scratch.mountPath", s.Scratch.MountPath)
}

// storageTypesFor lists the storage types a stack's cloud can use.
func (c *Config) storageTypesFor() []string {
	on := c.CloudEntry()
	out := []string{storage.TypeNFS}
	if !on.Creates {
		// On a cloud the in-cluster server's emptyDir would hold the only copy of the checkpoints.
		out = []string{storage.TypeInClusterNFS, storage.TypeNFS, storage.TypeLocal}
	}
	if on.Store != nil {
		out = append(out, on.Store.Type)
	}
	if on.Given() {
		out = append(out, existingStoreTypes()...)
	}
	return out
}

// StorageIdentity lists, by config key, the effective values whose change replaces the shared
// storage, plus storage.protect. Keys that do not apply to the storage type are left out.
//
//   - cloud, cluster.name, namespace: the Kubernetes provider (cluster.name is its cluster
//     identifier), the claim's namespace and the volume's name derive from them; on clouds the
//     file store's name derives from cluster.name.
//   - storage.type: a different type is different resources; the old ones are deleted.
//   - storage.server, storage.path (nfs): the volume's NFS source is immutable.
//   - storage.path (local): the volume's host directory is immutable.
//   - cluster.region, cluster.project, cluster.network, storage.tier, storage.zone (filestore):
//     Filestore cannot move, change tier or change network in place.
//   - cluster.region (efs), cluster.region, storage.tier, storage.account (azurefiles): an EFS file
//     system and a storage account live in one region; the account's name and kind are fixed.
//   - storage.protocol (azurefiles): a share's protocol is chosen when it is created. Updates by
//     versions before the key recorded none: their shares are all smb (olderIdentity).
//
// A size change is not in it: the clouds grow a file store in place, and Kubernetes refuses to
// shrink a claim rather than replacing it.
func StorageIdentity(c *Config) map[string]string {
	s := c.Storage
	id := map[string]string{
		"cloud":           c.Cloud,
		"cluster.name":    c.Cluster.Name,
		"namespace":       c.Namespace,
		"storage.type":    s.Type,
		"storage.protect": strconv.FormatBool(s.Protect),
	}
	switch s.Type {
	case storage.TypeNFS:
		id["storage.server"], id["storage.path"] = s.Server, s.Path
	case storage.TypeLocal:
		id["storage.path"] = s.Path
	}
	if st := storeCloud(s.Type); st != nil && st.Store.Identity != nil {
		st.Store.Identity(c, id) // the cloud's file store, created or existing
	}
	return id
}

// olderIdentity fills in what an update by an older version did not record but deployed all the
// same (each cloud's Store's Older).
func olderIdentity(previous map[string]string) map[string]string {
	for _, st := range cloudStores() {
		if st.Older != nil {
			previous = st.Older(previous)
		}
	}
	return previous
}
