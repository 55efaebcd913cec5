package storage

import (
	"fmt"
	"strings"

	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// Owner makes sure the user the workloads run as (kolotoc:runAsUser) can write the shared claim
// before any workload starts. Every store Kolotoc creates makes its root directory as root (the
// in-cluster NFS export, Filestore's and EFS's root, an Azure Files NFS share, the node directory
// of the local type), and the kubelet applies fsGroup to none of them. One Job:
//   - when the stack owns the store (Chown), its init container, the stack's only container that
//     runs as root, gives that root directory to the user, once and only that directory: files
//     already on the store keep theirs (a chown -R of a 2 TiB store would take hours; it is the
//     owner's call). A store the stack only mounts (an NFS export, an existing EFS file system or
//     Azure share) is never changed;
//   - then, as the user, it checks that the root and each of Dirs that already exists can be
//     written, and fails naming the first directory that cannot, so `pulumi up` stops there
//     instead of a training run failing on its first checkpoint (a subdirectory an older update
//     made as root, or a store whose root the stack cannot give away).
type Owner struct {
	UID   int    // the user and group (same number) the root directory is given to; not 0
	Image string // an image with a POSIX shell, id, stat and chown (coreutils or busybox)
	Pool  string // the pool its pod runs on (a CPU pool)
	// Chown: the stack owns the store and gives its root to UID; false: the store is checked only.
	Chown bool
	// MountPath is where the workloads mount the claim (the Job mounts it there too, so that its
	// messages name the directories the workloads see); default /shared.
	MountPath string
	// Dirs are the directories under MountPath the workloads write into, checked when they exist.
	Dirs []string
}

const (
	ownerComponent = "shared-owner"
	// ownerMountPath is where the owner's pod mounts the claim.
	ownerMountPath = "/shared"
	// ownerBackoffLimit: retries of the owner's pod. A store that refuses root's chown (an NFS
	// export with root squash) refuses it every time; the Job fails and `pulumi up` says so.
	ownerBackoffLimit = 2
	// ownerCPU, ownerMemory: the owner's requests and limits; stat and chown of one directory.
	ownerCPU    = "100m"
	ownerMemory = "64Mi"
)

// OwnerScript gives the directory at $1 to uid:gid $2 unless it already belongs to them, and
// says what it did. Only the directory's owner changes, not its mode: the owner has rwx on every
// store's root (0755 or wider). A store that refuses root's chown (an NFS export with root
// squash) fails the Job with what to do about it.
const OwnerScript = `set -eu
dir=$1 want=$2
now=$(stat -c %u:%g "$dir")
if [ "$now" = "$want" ]; then
  echo "shared-owner: $dir already belongs to $want"
elif chown "$want" "$dir"; then
  echo "shared-owner: $dir belonged to $now, now to $want"
else
  echo "shared-owner: the store refused to give $dir ($now) to $want (an NFS export with root squash?):" \
    "make its root directory belong to $want on the server, or set kolotoc:runAsUser to 0" >&2
  exit 1
fi
`

// WritableScript checks, as the workloads' user, that the directory of its first argument (the
// claim's root, which must be there) and each other one that exists can be written (by writing a
// file there), and names every one that cannot, with its owner and mode and what to do. The others
// that do not exist yet are skipped: the workloads make them under a parent that was checked.
const WritableScript = `set -u
uid=$(id -u) bad=0
if [ ! -d "$1" ]; then
  echo "shared-owner: $1 is not a directory uid $uid can reach" >&2
  exit 1
fi
for dir in "$@"; do
  [ -d "$dir" ] || continue
  probe="$dir/.kolotoc-write-check.$$"
  if (: >"$probe") 2>/dev/null; then
    rm -f "$probe"
  else
    echo "shared-owner: $dir is not writable by uid $uid (owner $(stat -c %u:%g "$dir"), mode $(stat -c %a "$dir")):" \
      "give it to $uid on the store (chown $uid:$uid '$dir'), or set kolotoc:runAsUser to its owner" >&2
    bad=1
  fi
done
[ "$bad" = 0 ] && echo "shared-owner: writable by uid $uid: $*"
exit "$bad"
`

// RenderOwnerJob is the Job that gives the claim's root to Owner.UID (when the stack owns the
// store) and checks that the user can write it. The chown runs as root with only CAP_CHOWN (no
// escalation, no other capability): chown of a directory root owns needs nothing else; the check
// runs as the user with no capability at all. The pod template names the uid, so a new runAsUser
// is a new Job (the template of a Job is immutable) and the directory changes hands again.
func RenderOwnerJob(a *Args) *batchv1.JobArgs {
	o := a.Owner
	mountPath := o.MountPath
	if mountPath == "" {
		mountPath = ownerMountPath
	}
	sc := meta.LockedDown("CHOWN")
	// Root whatever the image says (the Jupyter images' user is jovyan).
	sc.RunAsUser, sc.RunAsNonRoot = pulumi.Int(0), pulumi.Bool(false)
	resources := &corev1.ResourceRequirementsArgs{
		Requests: pulumi.StringMap{"cpu": pulumi.String(ownerCPU), "memory": pulumi.String(ownerMemory)},
		Limits:   pulumi.StringMap{"cpu": pulumi.String(ownerCPU), "memory": pulumi.String(ownerMemory)},
	}
	mounts := corev1.VolumeMountArray{meta.Mount("shared", mountPath)}
	var inits corev1.ContainerArray
	if o.Chown {
		inits = corev1.ContainerArray{corev1.ContainerArgs{
			Name:            pulumi.String("chown"),
			Image:           pulumi.String(o.Image),
			Command:         pulumi.StringArray{pulumi.String("/bin/sh"), pulumi.String("-c"), pulumi.String(OwnerScript), pulumi.String("shared-owner")},
			Args:            pulumi.StringArray{pulumi.String(mountPath), pulumi.String(fmt.Sprintf("%d:%d", o.UID, o.UID))},
			Resources:       resources,
			SecurityContext: sc,
			VolumeMounts:    mounts,
		}}
	}
	check := pulumi.StringArray{pulumi.String("/bin/sh"), pulumi.String("-c"), pulumi.String(WritableScript), pulumi.String("shared-owner"), pulumi.String(mountPath)}
	for _, d := range o.Dirs {
		check = append(check, pulumi.String(mountPath+"/"+strings.Trim(d, "/")))
	}
	return &batchv1.JobArgs{
		Metadata: a.Labels.ObjectMeta(OwnerJobName(a.ClaimName), a.Namespace, ownerComponent),
		Spec: &batchv1.JobSpecArgs{
			BackoffLimit: pulumi.Int(ownerBackoffLimit),
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(ownerComponent))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.PodSecurity(0),
					RestartPolicy:                pulumi.String("Never"),
					NodeSelector:                 a.Labels.PoolSelector(o.Pool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					InitContainers:               inits,
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:      pulumi.String("check"),
						Image:     pulumi.String(o.Image),
						Command:   check,
						Resources: resources,
						// The workloads' user, with nothing more than they have.
						SecurityContext: meta.LockedDownAs(o.UID),
						VolumeMounts:    mounts,
					}},
					Volumes: corev1.VolumeArray{meta.ClaimVolume("shared", a.ClaimName)},
				},
			},
		},
	}
}

// OwnerJobName is the owner Job's name: <claim>-owner.
func OwnerJobName(claim string) string { return claim + "-owner" }
