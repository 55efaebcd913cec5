package meta

import (
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Shared memory of training pods. Container runtimes give /dev/shm 64 MiB. NCCL keeps its
// intra-node buffers there (segments of about 4 MiB per peer and channel) and "will fail to
// initialize" when it cannot extend them (NCCL User Guide, Troubleshooting, "Runtime and MPI
// issues", Shared memory: it asks containers for at least --shm-size=1g); PyTorch's DataLoader
// workers pass every batch through it. So every training pod (towers, elastic workers, TF tasks)
// mounts a memory-backed emptyDir on /dev/shm, sized by its section's shmSize.
//
// Kubernetes sizes a memory-backed emptyDir's tmpfs at its sizeLimit, and its pages count toward
// the container's memory limit (Kubernetes docs, Volumes, emptyDir: "memory ... counts against
// your container's memory limit"). So the default, the pod's own memory, lets shared memory grow
// as far as the pod may (what docker's --ipc=host gives NCCL) and no further.
const (
	shmVolume = "shm"
	shmPath   = "/dev/shm"
)

// ShmVolume is the memory-backed /dev/shm volume of size (a quantity).
func ShmVolume(size string) corev1.VolumeArgs {
	return corev1.VolumeArgs{Name: pulumi.String(shmVolume), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{
		Medium: pulumi.String("Memory"), SizeLimit: pulumi.String(size),
	}}
}

// ShmMount mounts ShmVolume on /dev/shm.
func ShmMount() corev1.VolumeMountArgs { return Mount(shmVolume, shmPath) }

// CheckShm reports a shmSize (key) that is not a positive quantity, or larger than the memory
// of the pod it belongs to (memoryKey = memory): the tmpfs is charged to that memory, so a larger
// one could only end in the pod's OOM kill, never be used.
func CheckShm(p Problems, key, size, memoryKey, memory string) {
	q, err := resource.ParseQuantity(size)
	if err != nil || q.Sign() <= 0 {
		p.Add(key, OrUnset(size), "must be a positive quantity (e.g. 8Gi): the size of the memory-backed /dev/shm")
		return
	}
	if m, err := resource.ParseQuantity(memory); err == nil && q.Cmp(m) > 0 {
		p.Add(key, size, "must be at most "+memoryKey+" ("+memory+"): /dev/shm is memory of the pod")
	}
}
