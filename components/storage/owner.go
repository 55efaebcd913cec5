package storage

import (
	"fmt"

	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// Owner makes the shared claim's root directory belong to the user the workloads run as
// (kolotoc:runAsUser). Every store Kolotoc mounts creates that directory as root: an NFS export,
// Filestore's and EFS's root, an Azure Files NFS share, the node directory of the local type; and
// the kubelet applies fsGroup to none of them. One Job, the stack's only container that runs as
// root, changes the directory's owner, once and only that directory: files already on the store
// keep theirs (a chown -R of a 2 TiB store would take hours; it is the owner's call).
type Owner struct {
	UID   int    // the user and group (same number) the root directory is given to; not 0
	Image string // an image with a POSIX shell, stat and chown (coreutils or busybox)
	Pool  string // the pool its pod runs on (a CPU pool)
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

// RenderOwnerJob is the Job that gives the claim's root to Owner.UID. It runs as root with only
// CAP_CHOWN (no escalation, no other capability): chown of a directory root owns needs nothing
// else. The pod template names the uid, so a new runAsUser is a new Job (the template of a Job is
// immutable) and the directory changes hands again.
func RenderOwnerJob(a *Args) *batchv1.JobArgs {
	o := a.Owner
	sc := meta.LockedDown("CHOWN")
	// Root whatever the image says (the Jupyter images' user is jovyan).
	sc.RunAsUser, sc.RunAsNonRoot = pulumi.Int(0), pulumi.Bool(false)
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
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:    pulumi.String("chown"),
						Image:   pulumi.String(o.Image),
						Command: pulumi.StringArray{pulumi.String("/bin/sh"), pulumi.String("-c"), pulumi.String(OwnerScript), pulumi.String("shared-owner")},
						Args:    pulumi.StringArray{pulumi.String(ownerMountPath), pulumi.String(fmt.Sprintf("%d:%d", o.UID, o.UID))},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String(ownerCPU), "memory": pulumi.String(ownerMemory)},
							Limits:   pulumi.StringMap{"cpu": pulumi.String(ownerCPU), "memory": pulumi.String(ownerMemory)},
						},
						SecurityContext: sc,
						VolumeMounts:    corev1.VolumeMountArray{meta.Mount("shared", ownerMountPath)},
					}},
					Volumes: corev1.VolumeArray{meta.ClaimVolume("shared", a.ClaimName)},
				},
			},
		},
	}
}

// OwnerJobName is the owner Job's name: <claim>-owner.
func OwnerJobName(claim string) string { return claim + "-owner" }
