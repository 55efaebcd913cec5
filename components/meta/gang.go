package meta

import (
	"fmt"
	"strings"

	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Kueue's pod-group keys (sigs.k8s.io/kueue v0.17.0 pkg/controller/jobs/pod/constants and
// pkg/controller/constants; https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/#running-a-group-of-pods-to-be-admitted-together).
const (
	QueueNameLabel             = "kueue.x-k8s.io/queue-name"
	PodGroupNameLabel          = "kueue.x-k8s.io/pod-group-name"
	PodGroupTotalCountKey      = "kueue.x-k8s.io/pod-group-total-count"
	PodGroupRetriableKey       = "kueue.x-k8s.io/retriable-in-group"
	PodGroupServingKey         = "kueue.x-k8s.io/pod-group-serving"
	WorkloadPriorityClassLabel = "kueue.x-k8s.io/priority-class"
)

// Gang makes every pod of one workload (a TF cluster: its Jobs' pods) one Kueue plain pod group:
// Kueue's webhook holds each pod behind a scheduling gate until the group's Workload is
// admitted, which happens only once all Total pods exist and the ClusterQueue has quota for all
// of them at once. So either every task is placed, or none is and no GPU is held.
//
// The towers and the elastic workers' first set are StatefulSets and are queued as such (SetGang):
// a plain pod group cannot take back a lost pod that its StatefulSet re-creates under the same
// name (the group waits for good; docs/queueing.md "Why not one Kueue plain pod group"). A TF
// cluster's tasks are Jobs' pods, whose replacements have new names, so the group takes them.
type Gang struct {
	Queue    string // the LocalQueue the pods name
	Group    string // the pod group's name, unique in the namespace for as long as its Workload lives
	Total    int    // pods in the group: the Workload is created once that many exist
	Priority string // a WorkloadPriorityClass; "" for none
	// Serving: the group never finishes while it has pods (Kueue's serving pod groups,
	// pkg/controller/jobs/pod: Finished is false for them; with no pod left, the group's
	// Workload is finalized and its quota freed).
	Serving bool
}

// PodLabels adds the gang's labels to a pod template's.
func (g *Gang) PodLabels(labels map[string]string) {
	if g == nil {
		return
	}
	labels[QueueNameLabel] = g.Queue
	labels[PodGroupNameLabel] = g.Group
	if g.Priority != "" {
		labels[WorkloadPriorityClassLabel] = g.Priority
	}
}

// PodAnnotations are the gang's annotations of a pod template. A group is not retriable: a
// ring's run ends with its first failed rank anyway, and only a group that is not retriable is
// finished once none of its pods is active; the towers scaled to zero by onSuccess: release
// (meta.Releaser) then free the group's quota for the next workload in the queue.
func (g *Gang) PodAnnotations(annotations map[string]string) {
	if g == nil {
		return
	}
	annotations[PodGroupTotalCountKey] = fmt.Sprint(g.Total)
	if g.Serving {
		annotations[PodGroupServingKey] = "true"
		return
	}
	annotations[PodGroupRetriableKey] = "false"
}

// QueuedPodLabels are the labels of a pod that a queue admits on its own, one Workload per pod
// (Kueue's plain pods): the queue and, if any, the priority class.
func QueuedPodLabels(labels map[string]string, queue, priority string) {
	labels[QueueNameLabel] = queue
	if priority != "" {
		labels[WorkloadPriorityClassLabel] = priority
	}
}

// GroupName is a pod group's name for a workload and run: <workload>, or <workload>-<run> (a new
// run makes a new group, since a finished group's Workload stays until its pods are gone),
// within a label value's 63 characters.
func GroupName(workload, run string) string {
	n := workload
	if run != "" {
		n += "-" + run
	}
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-_.")
	}
	return n
}

// SetGang queues a StatefulSet's pods as one unit through Kueue's StatefulSet integration
// (sigs.k8s.io/kueue v0.17.0 pkg/controller/jobs/statefulset;
// https://kueue.sigs.k8s.io/docs/tasks/run/statefulset/): the set names the queue, Kueue's
// webhook gates every pod it creates, and one Workload per set (named after the set and its
// uid) is admitted once the ClusterQueue has quota for all its replicas at once. Unlike a plain
// pod group, a pod lost after admission (its process killed, evicted, its node gone) is simply
// re-created by the StatefulSet under the same name and runs at once under the same admission:
// Kueue puts no finalizer on a pod its parent suspends (feature SkipFinalizersForPodsSuspendedByParent,
// on by default in v0.17) and does not wait for a replacement.
//
// What Kueue allows to change in place is narrow (its StatefulSet webhook): the pod spec not at
// all while queued, the replicas only to zero and back from zero, and the latter only once the
// Workload of the earlier scale-down is gone. A queued set is therefore replaced on any change
// of its spec or annotations (QueuedSetReplaceOn; a new run changes an annotation): a new set
// has a new uid, so a new Workload, and never waits for the old one's deletion.
type SetGang struct {
	Queue    string // the LocalQueue the set names
	Priority string // a WorkloadPriorityClass; "" for none
}

// Labels adds the set's queue labels: to the StatefulSet's own (what Kueue's StatefulSet
// integration reads) and its pod template's (what a pod webhook scoped to queued objects, as
// the test bed's, selects on; Kueue would otherwise add the queue label to the pods itself).
func (g *SetGang) Labels(labels map[string]string) {
	if g == nil {
		return
	}
	QueuedPodLabels(labels, g.Queue, g.Priority)
}

// MarkSet marks a queued StatefulSet's own metadata: the queue labels (what Kueue's StatefulSet
// integration reads) and deletion in the background, since the set is replaced, never updated
// (QueuedSetReplaceOn): the old set goes at once and its pods after it, so the new set (a new
// uid, a new Workload) is created without waiting for the old pods' grace periods; its pods take
// their names as the old ones free them. The metadata's Labels and Annotations are StringMaps.
func (g *SetGang) MarkSet(md *metav1.ObjectMetaArgs) {
	if g == nil {
		return
	}
	labels := map[string]string{}
	g.Labels(labels)
	for k, v := range labels {
		md.Labels.(pulumi.StringMap)[k] = pulumi.String(v)
	}
	md.Annotations.(pulumi.StringMap)["pulumi.com/deletionPropagationPolicy"] = pulumi.String("background")
}

// QueuedSetReplaceOn are the paths of a queued StatefulSet whose change replaces it (SetGang).
var QueuedSetReplaceOn = []string{"spec", "metadata.annotations"}

// QueueLabelPath is the queue label of a StatefulSet: an unqueued set is replaced when it gains
// one (turning the queue on), and a queued one when it loses it (turning the queue off), which
// Kueue's StatefulSet webhook refuses in place while the set has ready pods ("queue-name is
// immutable").
var QueueLabelPath = `metadata.labels["` + QueueNameLabel + `"]`
