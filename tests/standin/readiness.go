package standin

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Readiness is one evaluation of an object's await condition.
type Readiness struct {
	// Ready is true once the object is considered initialized.
	Ready bool
	// Failed is true when the object can no longer become ready (e.g. a Job failed).
	Failed bool
	// Status is the progress line shown while waiting.
	Status string
	// Errors explain why the object is not ready; they become the failure's reasons.
	Errors []string
}

const revisionAnnotation = "deployment.kubernetes.io/revision"

func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// DeploymentReadiness follows the real provider's Deployment awaiter: the controller has
// observed the current generation and created a ReplicaSet for the current revision; the
// Deployment is Available; the new ReplicaSet has all its Pods ready (and, after the first
// revision, the Progressing condition says NewReplicaSetAvailable); every PVC the Pods
// mount is Bound.
func DeploymentReadiness(dep *appsv1.Deployment, replicaSets []appsv1.ReplicaSet,
	pvcs []corev1.PersistentVolumeClaim,
) Readiness {
	var r Readiness
	if dep.Status.ObservedGeneration < dep.Generation {
		r.Status = "Waiting for the Deployment controller to observe the new generation"
		r.Errors = append(r.Errors, fmt.Sprintf("Deployment controller has not observed generation %d (observed %d)",
			dep.Generation, dep.Status.ObservedGeneration))
		return r
	}
	revision := dep.Annotations[revisionAnnotation]

	available, rsAvailable := false, false
	var conditionErrors []string
	for _, c := range dep.Status.Conditions {
		switch c.Type {
		case appsv1.DeploymentProgressing:
			progressing := c.Status == corev1.ConditionTrue
			if !progressing && c.Reason != "" && c.Message != "" {
				conditionErrors = append(conditionErrors, fmt.Sprintf("[%s] %s", c.Reason, c.Message))
			}
			rsAvailable = progressing && c.Reason == "NewReplicaSetAvailable"
		case appsv1.DeploymentAvailable:
			available = c.Status == corev1.ConditionTrue
			if !available && c.Reason != "" && c.Message != "" {
				conditionErrors = append(conditionErrors, fmt.Sprintf("[%s] %s", c.Reason, c.Message))
			}
		}
	}

	var rs *appsv1.ReplicaSet
	for i := range replicaSets {
		if ownedBy(&replicaSets[i], dep.UID) && revision != "" && replicaSets[i].Annotations[revisionAnnotation] == revision {
			rs = &replicaSets[i]
		}
	}
	var specReplicas, readyReplicas int32 = 1, 0
	updatedReady := false
	if rs != nil {
		if rs.Spec.Replicas != nil {
			specReplicas = *rs.Spec.Replicas
		}
		readyReplicas = rs.Status.ReadyReplicas
		// When the template changed, this ReplicaSet is the new revision's (the revision
		// annotation moved on); otherwise it is the same one, scaled. Either way it must be ready.
		updatedReady = readyReplicas >= specReplicas
	} else if dep.Spec.Replicas != nil {
		specReplicas = *dep.Spec.Replicas
	}

	var failedPVCs []string
	for _, claim := range claimNames(dep.Spec.Template.Spec.Volumes) {
		bound := false
		for _, pvc := range pvcs {
			if pvc.Name == claim && pvc.Status.Phase == corev1.ClaimBound {
				bound = true
			}
		}
		if !bound {
			failedPVCs = append(failedPVCs, claim)
		}
	}
	pvcsReady := len(failedPVCs) == 0

	if revision == "1" {
		r.Ready = available && updatedReady && pvcsReady
	} else {
		r.Ready = available && rsAvailable && updatedReady && pvcsReady
	}
	if r.Ready {
		r.Status = "Deployment initialization complete"
		return r
	}
	r.Status = fmt.Sprintf("Waiting for app ReplicaSet to be available (%d/%d Pods available)", readyReplicas, specReplicas)
	r.Errors = append(r.Errors, conditionErrors...)
	if !pvcsReady {
		r.Errors = append(r.Errors, fmt.Sprintf("Failed to bind PersistentVolumeClaim(s): %q", strings.Join(failedPVCs, ",")))
	}
	switch {
	case !available:
		r.Errors = append(r.Errors, "Minimum number of live Pods was not attained")
	case revision != "1" && !rsAvailable:
		r.Errors = append(r.Errors, "Attempted to roll forward to new ReplicaSet, but minimum number of Pods did not become live")
	case !updatedReady:
		r.Errors = append(r.Errors, "Minimum number of Pods to consider the application live was not attained")
	}
	return r
}

func claimNames(volumes []corev1.Volume) []string {
	var out []string
	for _, v := range volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// CurrentReplicaSet returns the ReplicaSet of the Deployment's current revision, if any.
func CurrentReplicaSet(dep *appsv1.Deployment, replicaSets []appsv1.ReplicaSet) *appsv1.ReplicaSet {
	revision := dep.Annotations[revisionAnnotation]
	for i := range replicaSets {
		if ownedBy(&replicaSets[i], dep.UID) && revision != "" && replicaSets[i].Annotations[revisionAnnotation] == revision {
			return &replicaSets[i]
		}
	}
	return nil
}

// StatefulSetReadiness follows the real provider's StatefulSet awaiter: every replica is
// ready and current, and the current revision has reached the update revision (for the
// OnDelete strategy after the first generation, only the replica counts). In addition the
// controller must have observed the current generation, so that a stale status from
// before an update is never taken for success.
func StatefulSetReadiness(sts *appsv1.StatefulSet) Readiness {
	var r Readiness
	if sts.Generation == 0 {
		r.Status = "Waiting for StatefulSet to be created"
		return r
	}
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	st := sts.Status
	observed := st.ObservedGeneration >= sts.Generation
	var revisionReady, replicasReady bool
	if sts.Generation > 1 && sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		revisionReady = true
		replicasReady = replicas == st.Replicas && replicas == st.ReadyReplicas
	} else {
		revisionReady = st.CurrentRevision != "" && st.CurrentRevision == st.UpdateRevision
		replicasReady = replicas == st.Replicas && replicas == st.ReadyReplicas && replicas == st.CurrentReplicas
	}
	current := st.ReadyReplicas
	if !revisionReady && st.ReadyReplicas > st.UpdatedReplicas {
		current = st.UpdatedReplicas
	}
	if observed && revisionReady && replicasReady {
		r.Ready = true
		r.Status = "StatefulSet initialization complete"
		return r
	}
	switch {
	case sts.Generation <= 1:
		r.Status = fmt.Sprintf("[1/2] Waiting for StatefulSet to create Pods (%d/%d Pods ready)", current, replicas)
	case !replicasReady || !observed:
		r.Status = fmt.Sprintf("[1/3] Waiting for StatefulSet update to roll out (%d/%d Pods ready)", current, replicas)
	default:
		r.Status = "[2/3] Waiting for StatefulSet to update .status.currentRevision"
	}
	if !observed {
		r.Errors = append(r.Errors, fmt.Sprintf("StatefulSet controller has not observed generation %d (observed %d)",
			sts.Generation, st.ObservedGeneration))
	}
	if !replicasReady {
		r.Errors = append(r.Errors, fmt.Sprintf("%d out of %d replicas succeeded readiness checks", current, replicas))
	}
	if !revisionReady {
		r.Errors = append(r.Errors, fmt.Sprintf("StatefulSet controller failed to advance from revision %q to revision %q",
			st.CurrentRevision, st.UpdateRevision))
	}
	return r
}

// DaemonSetReadiness follows the kstatus rule the real provider uses for DaemonSets: the
// current generation is observed and every node that should run a Pod has a current,
// updated, available and ready one.
func DaemonSetReadiness(ds *appsv1.DaemonSet) Readiness {
	var r Readiness
	st := ds.Status
	fail := func(status string) Readiness {
		r.Status = status
		r.Errors = append(r.Errors, status)
		return r
	}
	if st.ObservedGeneration < ds.Generation || st.ObservedGeneration == 0 {
		return fail(fmt.Sprintf("DaemonSet generation is %d, but latest observed generation is %d", ds.Generation, st.ObservedGeneration))
	}
	desired := st.DesiredNumberScheduled
	switch {
	case desired > st.CurrentNumberScheduled:
		return fail(fmt.Sprintf("Current: %d/%d", st.CurrentNumberScheduled, desired))
	case desired > st.UpdatedNumberScheduled:
		return fail(fmt.Sprintf("Updated: %d/%d", st.UpdatedNumberScheduled, desired))
	case desired > st.NumberAvailable:
		return fail(fmt.Sprintf("Available: %d/%d", st.NumberAvailable, desired))
	case desired > st.NumberReady:
		return fail(fmt.Sprintf("Ready: %d/%d", st.NumberReady, desired))
	}
	r.Ready = true
	r.Status = fmt.Sprintf("All replicas scheduled as expected. Replicas: %d", desired)
	return r
}

// JobReadiness follows the real provider's Job checker: the Job has started and has a
// Complete=True condition. A Failed=True condition fails at once with its reason.
func JobReadiness(job *batchv1.Job) Readiness {
	var r Readiness
	name := fqName(job.Namespace, job.Name)
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			r.Failed = true
			r.Status = fmt.Sprintf("Job %q failed", name)
			r.Errors = append(r.Errors, fmt.Sprintf("[%s] %s", c.Reason, c.Message))
			return r
		}
	}
	if job.Status.StartTime == nil {
		r.Status = fmt.Sprintf("Waiting for Job %q to start", name)
		r.Errors = append(r.Errors, r.Status)
		return r
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			r.Ready = true
			r.Status = "Job ready"
			return r
		}
	}
	r.Status = fmt.Sprintf("Waiting for Job %q to succeed (Active: %d | Succeeded: %d | Failed: %d)",
		name, job.Status.Active, job.Status.Succeeded, job.Status.Failed)
	r.Errors = append(r.Errors, r.Status)
	return r
}

// ServiceNeedsEndpoints reports whether the Service awaiter waits for endpoints: every
// Service except headless (clusterIP None) and ExternalName ones, as in the real provider.
func ServiceNeedsEndpoints(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// ServiceReadiness follows the real provider's Service awaiter, reading EndpointSlices
// (the successor of the Endpoints it watches): a Service that needs endpoints is ready
// when some EndpointSlice of it lists an endpoint, and a LoadBalancer also needs an
// ingress address. The caller adds the settling delay.
func ServiceReadiness(svc *corev1.Service, slices []discoveryv1.EndpointSlice) Readiness {
	var r Readiness
	serviceReady := true
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		serviceReady = len(svc.Status.LoadBalancer.Ingress) > 0
	}
	if !ServiceNeedsEndpoints(svc) {
		r.Ready = serviceReady
		r.Status = "Service initialization complete"
		return r
	}
	endpointsReady := false
	for _, s := range slices {
		if s.Labels[discoveryv1.LabelServiceName] == svc.Name && len(s.Endpoints) > 0 {
			endpointsReady = true
		}
	}
	switch {
	case serviceReady && endpointsReady:
		r.Ready = true
		r.Status = "Service initialization complete"
		return r
	case endpointsReady:
		r.Status = "[2/3] Attempting to allocate IP address to Service"
	default:
		r.Status = "[1/3] Finding Pods to direct traffic to"
	}
	if !endpointsReady {
		r.Errors = append(r.Errors, "Service does not target any Pods. Selected Pods may not be ready, or "+
			"field '.spec.selector' may not match labels on any Pods")
	}
	if !serviceReady {
		r.Errors = append(r.Errors, "Service was not allocated an IP address; does your cloud provider support this?")
	}
	return r
}

// PVCReadiness: a claim is ready when Bound, or still Pending if its StorageClass binds on
// first consumer.
func PVCReadiness(pvc *corev1.PersistentVolumeClaim, bindMode storagev1.VolumeBindingMode) Readiness {
	var r Readiness
	if bindMode == storagev1.VolumeBindingWaitForFirstConsumer {
		r.Ready = pvc.Status.Phase == corev1.ClaimPending || pvc.Status.Phase == corev1.ClaimBound
	} else {
		r.Ready = pvc.Status.Phase == corev1.ClaimBound
	}
	if r.Ready {
		r.Status = "PVC ready"
		return r
	}
	r.Status = fmt.Sprintf("Waiting for PersistentVolumeClaim %q to be bound (phase %q)", pvc.Name, pvc.Status.Phase)
	r.Errors = append(r.Errors, r.Status)
	return r
}

// PVReadiness: a volume is ready when Available or Bound.
func PVReadiness(pv *corev1.PersistentVolume) Readiness {
	var r Readiness
	r.Ready = pv.Status.Phase == corev1.VolumeAvailable || pv.Status.Phase == corev1.VolumeBound
	if r.Ready {
		r.Status = "PV ready"
		return r
	}
	r.Status = fmt.Sprintf("Waiting for PersistentVolume %q to become available (phase %q)", pv.Name, pv.Status.Phase)
	r.Errors = append(r.Errors, r.Status)
	return r
}

// NamespaceReadiness: a namespace is ready when Active.
func NamespaceReadiness(ns *corev1.Namespace) Readiness {
	var r Readiness
	r.Ready = ns.Status.Phase == corev1.NamespaceActive
	if r.Ready {
		r.Status = "Namespace active"
		return r
	}
	r.Status = fmt.Sprintf("Waiting for Namespace %q to become Active (phase %q)", ns.Name, ns.Status.Phase)
	r.Errors = append(r.Errors, r.Status)
	return r
}

// PodReadiness: a Pod is ready when its Ready condition is True or it has Succeeded.
func PodReadiness(pod *corev1.Pod) Readiness {
	var r Readiness
	if pod.Status.Phase == corev1.PodSucceeded {
		r.Ready = true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			r.Ready = true
		}
	}
	if r.Ready {
		r.Status = "Pod ready"
		return r
	}
	r.Status = fmt.Sprintf("Waiting for Pod %q to be ready", fqName(pod.Namespace, pod.Name))
	r.Errors = append(r.Errors, PodProblems(pod)...)
	if len(r.Errors) == 0 {
		r.Errors = append(r.Errors, r.Status)
	}
	return r
}

// PodProblems explains why a Pod is not ready, in the real provider's Pod checker's
// terms: an unschedulable Pod gives the scheduler's reason; an uninitialized or unready
// one its condition message and the waiting/terminated reasons of its containers.
func PodProblems(pod *corev1.Pod) []string {
	name := fqName(pod.Namespace, pod.Name)
	if pod.Status.Phase == corev1.PodSucceeded {
		return nil
	}
	cond := func(t corev1.PodConditionType) *corev1.PodCondition {
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == t {
				return &pod.Status.Conditions[i]
			}
		}
		return nil
	}
	if c := cond(corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		if c != nil && c.Message != "" {
			return []string{fmt.Sprintf("[Pod %s]: Pod unschedulable (%s): %s", name, c.Reason, c.Message)}
		}
		return []string{fmt.Sprintf("[Pod %s]: Pod not yet scheduled", name)}
	}
	if c := cond(corev1.PodInitialized); c != nil && c.Status != corev1.ConditionTrue {
		return []string{podError(c, containerErrors(pod.Status.InitContainerStatuses), name)}
	}
	if c := cond(corev1.PodReady); c != nil && c.Status != corev1.ConditionTrue {
		return []string{podError(c, containerErrors(pod.Status.ContainerStatuses), name)}
	}
	return nil
}

func podError(c *corev1.PodCondition, errs []string, name string) string {
	msg := fmt.Sprintf("[Pod %s]: ", name)
	if c.Reason != "" && c.Message != "" {
		msg += c.Message
	}
	for _, e := range errs {
		msg += " -- " + e
	}
	return msg
}

func containerErrors(statuses []corev1.ContainerStatus) []string {
	var errs []string
	for _, s := range statuses {
		if s.Ready {
			continue
		}
		if w := s.State.Waiting; w != nil && w.Reason != "ContainerCreating" && w.Reason != "" {
			errs = append(errs, fmt.Sprintf("[%s] %s", w.Reason, w.Message))
		}
		if t := s.State.Terminated; t != nil && t.Reason != "" {
			if t.Message != "" {
				errs = append(errs, fmt.Sprintf("[%s] %s", t.Reason, t.Message))
			} else {
				errs = append(errs, fmt.Sprintf("Container %q completed with exit code %d", s.Name, t.ExitCode))
			}
		}
	}
	return errs
}

// SecretReadiness: only service-account-token Secrets wait, until the token controller
// has filled their data.
func SecretReadiness(secret *corev1.Secret) Readiness {
	var r Readiness
	if secret.Type != corev1.SecretTypeServiceAccountToken || len(secret.Data) > 0 {
		r.Ready = true
		r.Status = "Secret ready"
		return r
	}
	r.Status = fmt.Sprintf("Waiting for the token controller to fill Secret %q", secret.Name)
	r.Errors = append(r.Errors, r.Status)
	return r
}
