package meta

import (
	"fmt"
	"strings"
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

// Gang makes every pod of one workload (the towers and their launcher; a TF cluster) one Kueue
// pod group: Kueue's webhook holds each pod behind a scheduling gate until the group's Workload
// is admitted, which happens only once all Total pods exist and the ClusterQueue has quota for
// all of them at once. So either every rank is placed, or none is and no GPU is held.
//
// Why plain pod groups and not the StatefulSet or Job integrations: those admit a StatefulSet and
// a Job as two Workloads, one at a time; a pod group may span both. Neither object carries the
// queue label (only their pods do), so Kueue's own StatefulSet and Job integrations leave them
// alone (jobframework.FindAncestorJobManagedByKueue: an owner without a queue is not managed).
type Gang struct {
	Queue    string // the LocalQueue the pods name
	Group    string // the pod group's name, unique in the namespace for as long as its Workload lives
	Total    int    // pods in the group: the Workload is created once that many exist
	Priority string // a WorkloadPriorityClass; "" for none
	// Serving: the group never finishes while it has pods (Kueue's serving pod groups,
	// pkg/controller/jobs/pod: Finished is false for them; with no pod left, the group's
	// Workload is finalized and its quota freed). For elastic workers. Known problem: a pod lost
	// after admission keeps Kueue's finalizer until Kueue sees a replacement, which its
	// StatefulSet cannot create under the same name, so the group waits for good
	// (docs/queueing.md, "A lost pod of a queued group"; the fix is on branch sts-queue).
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
