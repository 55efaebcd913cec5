package stacks

import (
	"fmt"
	"strconv"

	"kolotoc/components/ring"
	"kolotoc/components/storage"
)

// The user the training workloads run as (kolotoc:runAsUser): the towers (sshd and the ranks),
// the launcher, the Dask carriers and sentinels, the elastic and TF workers, and Jupyter. 0, the
// default, keeps each image's own user, which is root in the default Horovod and Dask images; any
// other uid runs every one of them as that user and group, with no capability, and gives the
// shared claim's root directory to it (storage.Owner) so that checkpoints can be written.

const (
	// maxRunAsUser: the largest uid Kubernetes accepts (int32 in the kubelet's checks).
	maxRunAsUser = 1<<31 - 1
	// minNonRootPort: a user other than root cannot bind a port below it (the towers' sshd).
	minNonRootPort = 1024
)

// NonRoot reports whether the workloads run as a user other than root.
func (c *Config) NonRoot() bool { return c.RunAsUser != 0 }

func (c *Config) validateRunAsUser(v *Validator) {
	if c.RunAsUser < 0 || c.RunAsUser > maxRunAsUser {
		v.add("runAsUser", strconv.Itoa(c.RunAsUser), fmt.Sprintf("allowed: 0 (each image's own user) or a uid from 1 to %d", maxRunAsUser))
		return
	}
	if !c.NonRoot() {
		return
	}
	if c.Towers.Enabled && c.Towers.SSHPort >= 1 && c.Towers.SSHPort < minNonRootPort {
		v.add("towers.sshPort", strconv.Itoa(c.Towers.SSHPort), fmt.Sprintf(
			"with runAsUser %d the towers' sshd runs as that user, which cannot bind a port below %d; allowed: %d..65535 (default %d)",
			c.RunAsUser, minNonRootPort, minNonRootPort, ring.DefaultSSHPort))
	}
}

// storageOwner is the Job that makes sure the workloads' user can write the shared claim
// (storage.Owner), or nil when they run as their images' users, or when an EFS access point
// (storage.accessPointId) decides whom every file operation runs as: its POSIX user, whatever the
// pod's (and root's chown through it is refused). It gives the root directory to the user only
// on a store the stack made; a store it only mounts (ExistingStore) is checked, never changed. It
// runs in the first training image of the stack (each has a shell, id, stat and chown) on the
// entrypoint's pool, which the stack always has.
func (c *Config) storageOwner() *storage.Owner {
	if !c.NonRoot() || c.Storage.AccessPointID != "" {
		return nil
	}
	return &storage.Owner{UID: c.RunAsUser, Image: c.ownerImage(), Pool: c.Entrypoint.Pool,
		Chown: !c.ExistingStore(), MountPath: c.Storage.MountPath, Dirs: c.writtenDirs()}
}

// writtenDirs are the directories under the shared claim that Kolotoc's workloads write into:
// the checkpoint and log trees, and the enabled workloads' own in them.
func (c *Config) writtenDirs() []string {
	dirs := []string{"checkpoints", "logs"}
	for _, wl := range c.enabledWorkloads() {
		if wl.Dirs != nil {
			dirs = append(dirs, wl.Dirs(c)...)
		}
	}
	return dirs
}

// ownerImage is the image the storage owner Job runs: the first enabled training workload's (the
// towers', the carriers', the elastic workers', the TF tasks'), else Jupyter's (the entrypoint
// is always deployed).
func (c *Config) ownerImage() string {
	for _, wl := range c.enabledWorkloads() {
		if wl.Image != nil {
			return wl.Image(c)
		}
	}
	return c.Entrypoint.JupyterImage
}
