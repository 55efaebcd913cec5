package stacks

import (
	"fmt"
	"strings"

	"kolotoc/components/storage"
)

// StorageName names the shared ReadWriteMany claim every workload mounts.
const StorageName = "shared"

// localStorageRoot: storage.type local keeps a stack's shared directory under
// <root>/<namespace>/shared on the node, one directory per stack.
const localStorageRoot = "/var/lib/kolotoc"

// applyStorageDefaults fills the store's type off the clouds, its path, and the storage's own.
func (c *Config) applyStorageDefaults() {
	s := &c.Storage
	if s.Type == "" && !IsCloud(c.Cloud) {
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

// allowedStorage are the storage types a stack can name in kolotoc:storage.type.
var allowedStorage = []string{storage.TypeInClusterNFS, storage.TypeNFS, storage.TypeLocal, storage.TypeFilestore, storage.TypeEFS, storage.TypeAzureFiles}

func (c *Config) validateStorage(v *validator) {
	s := c.Storage
	switch {
	case IsCloud(c.Cloud) && s.Type == "":
		v.add("storage.type", "(unset)", fmt.Sprintf("required on %s: the checkpoints need storage that outlives the pods; allowed on %s: %s",
			c.Cloud, c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	case IsCloud(c.Cloud) && s.Type == storage.TypeInClusterNFS:
		v.add("storage.type", s.Type, fmt.Sprintf("keeps its data in the server pod's emptyDir: a node upgrade, an eviction or a "+
			"restart erases every checkpoint; allowed on %s: %s", c.Cloud, strings.Join(c.storageTypesFor(), ", ")))
	default:
		v.oneOf("storage.type", s.Type, allowedStorage)
	}
	s.Validate(v) // the storage's own settings (components/storage/config.go)
	if c.InClusterNFS() {
		v.image("storage.image", s.Image)
	}
	v.quantity("storage.size", s.Size)
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
	v.quantity("storage.scratch.sizeLimit", s.Scratch.SizeLimit)
	v.absPath("storage.scratch.mountPath", s.Scratch.MountPath)
}
