package standin

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ptr[T any](v T) *T { return &v }

func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func depFixture(generation, observed int64, revision string, available bool, progressReason string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "entry", Namespace: "ml", UID: types.UID("dep-uid"), Generation: generation,
			Annotations: map[string]string{revisionAnnotation: revision}},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr(int32(2))},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed},
	}
	status := corev1.ConditionFalse
	if available {
		status = corev1.ConditionTrue
	}
	d.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: status, Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability."},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: progressReason},
	}
	return d
}

func rsFixture(revision string, replicas, ready int32) appsv1.ReplicaSet {
	return appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "entry-" + revision, UID: types.UID("rs-" + revision),
			Annotations:     map[string]string{revisionAnnotation: revision},
			OwnerReferences: []metav1.OwnerReference{{UID: "dep-uid"}}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr(replicas)},
		Status: appsv1.ReplicaSetStatus{ReadyReplicas: ready},
	}
}

func TestDeploymentReadiness(t *testing.T) {
	cases := []struct {
		name      string
		dep       *appsv1.Deployment
		rss       []appsv1.ReplicaSet
		ready     bool
		errSubstr string
	}{
		{"controller has not observed", depFixture(2, 1, "1", true, "NewReplicaSetAvailable"),
			[]appsv1.ReplicaSet{rsFixture("1", 2, 2)}, false, "has not observed generation 2"},
		{"first revision, pods ready", depFixture(1, 1, "1", true, "ReplicaSetUpdated"),
			[]appsv1.ReplicaSet{rsFixture("1", 2, 2)}, true, ""},
		{"first revision, pods not ready", depFixture(1, 1, "1", false, "ReplicaSetUpdated"),
			[]appsv1.ReplicaSet{rsFixture("1", 2, 1)}, false, "Minimum number of live Pods was not attained"},
		{"rollout in progress", depFixture(2, 2, "2", true, "ReplicaSetUpdated"),
			[]appsv1.ReplicaSet{rsFixture("1", 0, 0), rsFixture("2", 2, 2)}, false, "roll forward to new ReplicaSet"},
		{"rollout complete", depFixture(2, 2, "2", true, "NewReplicaSetAvailable"),
			[]appsv1.ReplicaSet{rsFixture("1", 0, 0), rsFixture("2", 2, 2)}, true, ""},
		{"no ReplicaSet of the revision yet", depFixture(2, 2, "2", true, "NewReplicaSetAvailable"),
			[]appsv1.ReplicaSet{rsFixture("1", 2, 2)}, false, "Minimum number of Pods to consider the application live"},
	}
	for _, c := range cases {
		r := DeploymentReadiness(c.dep, c.rss, nil)
		if r.Ready != c.ready {
			t.Errorf("%s: ready=%v, want %v (status %q, errors %v)", c.name, r.Ready, c.ready, r.Status, r.Errors)
		}
		if c.errSubstr != "" && !contains(r.Errors, c.errSubstr) {
			t.Errorf("%s: errors %v lack %q", c.name, r.Errors, c.errSubstr)
		}
	}
}

func TestDeploymentWaitsForMountedClaims(t *testing.T) {
	dep := depFixture(1, 1, "1", true, "NewReplicaSetAvailable")
	dep.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}}
	rss := []appsv1.ReplicaSet{rsFixture("1", 2, 2)}
	pending := []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}}
	if r := DeploymentReadiness(dep, rss, pending); r.Ready || !contains(r.Errors, `Failed to bind PersistentVolumeClaim(s): "shared"`) {
		t.Fatalf("pending claim: ready=%v errors=%v", r.Ready, r.Errors)
	}
	pending[0].Status.Phase = corev1.ClaimBound
	if r := DeploymentReadiness(dep, rss, pending); !r.Ready {
		t.Fatalf("bound claim: not ready: %v", r.Errors)
	}
}

func stsFixture(gen, observed int64, replicas, ready, current, updated int32, curRev, updRev string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Generation: gen},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr(replicas)},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, Replicas: replicas, ReadyReplicas: ready,
			CurrentReplicas: current, UpdatedReplicas: updated, CurrentRevision: curRev, UpdateRevision: updRev},
	}
}

func TestStatefulSetReadiness(t *testing.T) {
	cases := []struct {
		name      string
		sts       *appsv1.StatefulSet
		ready     bool
		errSubstr string
	}{
		{"all ready", stsFixture(1, 1, 4, 4, 4, 4, "w-1", "w-1"), true, ""},
		{"pods pending", stsFixture(1, 1, 4, 1, 4, 4, "w-1", "w-1"), false, "1 out of 4 replicas succeeded readiness checks"},
		{"revision not rolled", stsFixture(2, 2, 4, 4, 2, 2, "w-1", "w-2"), false, `failed to advance from revision "w-1" to revision "w-2"`},
		{"stale status after update", stsFixture(3, 2, 4, 4, 4, 4, "w-2", "w-2"), false, "has not observed generation 3"},
	}
	for _, c := range cases {
		r := StatefulSetReadiness(c.sts)
		if r.Ready != c.ready {
			t.Errorf("%s: ready=%v, want %v (%v)", c.name, r.Ready, c.ready, r.Errors)
		}
		if c.errSubstr != "" && !contains(r.Errors, c.errSubstr) {
			t.Errorf("%s: errors %v lack %q", c.name, r.Errors, c.errSubstr)
		}
	}
	// Hand-scaled: spec says 6, status has 4: not ready until the controller catches up.
	scaled := stsFixture(2, 2, 6, 4, 4, 4, "w-1", "w-1")
	scaled.Status.Replicas = 4
	if r := StatefulSetReadiness(scaled); r.Ready {
		t.Errorf("scaled StatefulSet reported ready")
	}
	onDelete := stsFixture(2, 2, 2, 2, 0, 0, "w-1", "w-2")
	onDelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	if r := StatefulSetReadiness(onDelete); !r.Ready {
		t.Errorf("OnDelete StatefulSet with ready replicas not ready: %v", r.Errors)
	}
}

func TestDaemonSetReadiness(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-device-plugin", Generation: 1},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3,
			UpdatedNumberScheduled: 3, NumberAvailable: 3, NumberReady: 3}}
	if r := DaemonSetReadiness(ds); !r.Ready {
		t.Fatalf("rolled-out DaemonSet not ready: %v", r.Errors)
	}
	ds.Status.UpdatedNumberScheduled = 1
	if r := DaemonSetReadiness(ds); r.Ready || !contains(r.Errors, "Updated: 1/3") {
		t.Fatalf("partially updated: ready=%v errors=%v", r.Ready, r.Errors)
	}
	ds.Status.UpdatedNumberScheduled, ds.Status.NumberReady = 3, 2
	if r := DaemonSetReadiness(ds); r.Ready || !contains(r.Errors, "Ready: 2/3") {
		t.Fatalf("not all ready: ready=%v errors=%v", r.Ready, r.Errors)
	}
	ds.Generation = 2
	if r := DaemonSetReadiness(ds); r.Ready {
		t.Fatalf("unobserved generation reported ready")
	}
}

func TestJobReadiness(t *testing.T) {
	now := metav1.Now()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "launcher", Namespace: "ml"}}
	if r := JobReadiness(j); r.Ready || r.Failed || !strings.Contains(r.Status, "to start") {
		t.Fatalf("unstarted job: %+v", r)
	}
	j.Status.StartTime = &now
	j.Status.Active = 1
	if r := JobReadiness(j); r.Ready || !strings.Contains(r.Status, "Active: 1") {
		t.Fatalf("running job: %+v", r)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if r := JobReadiness(j); !r.Ready {
		t.Fatalf("complete job not ready: %+v", r)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	if r := JobReadiness(j); r.Ready || !r.Failed || !contains(r.Errors, "[BackoffLimitExceeded] Job has reached") {
		t.Fatalf("failed job: %+v", r)
	}
}

func TestServiceReadiness(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "entry"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "entry"}}}
	if r := ServiceReadiness(svc, nil); r.Ready || !contains(r.Errors, "Service does not target any Pods") {
		t.Fatalf("no endpoints: %+v", r)
	}
	slice := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "entry-abc",
		Labels: map[string]string{discoveryv1.LabelServiceName: "entry"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}}}}
	if r := ServiceReadiness(svc, []discoveryv1.EndpointSlice{slice}); !r.Ready {
		t.Fatalf("with endpoints: %+v", r)
	}
	other := slice
	other.Labels = map[string]string{discoveryv1.LabelServiceName: "someone-else"}
	if r := ServiceReadiness(svc, []discoveryv1.EndpointSlice{other}); r.Ready {
		t.Fatalf("another Service's endpoints counted")
	}
	headless := svc.DeepCopy()
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	if r := ServiceReadiness(headless, nil); !r.Ready {
		t.Fatalf("headless Service waits for endpoints")
	}
	lb := svc.DeepCopy()
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	if r := ServiceReadiness(lb, []discoveryv1.EndpointSlice{slice}); r.Ready || !contains(r.Errors, "not allocated an IP address") {
		t.Fatalf("LoadBalancer without ingress: %+v", r)
	}
}

func TestPVCReadiness(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "scratch"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	if r := PVCReadiness(pvc, storagev1.VolumeBindingImmediate); r.Ready {
		t.Fatalf("pending claim with Immediate binding reported ready")
	}
	if r := PVCReadiness(pvc, storagev1.VolumeBindingWaitForFirstConsumer); !r.Ready {
		t.Fatalf("pending claim with WaitForFirstConsumer not ready")
	}
	pvc.Status.Phase = corev1.ClaimBound
	if r := PVCReadiness(pvc, ""); !r.Ready {
		t.Fatalf("bound claim not ready")
	}
}

func TestPodProblemsExplainPendingPods(t *testing.T) {
	unschedulable := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "workers-0", Namespace: "ml"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
		}}}}
	got := PodProblems(unschedulable)
	if len(got) != 1 || !strings.Contains(got[0], "ml/workers-0") || !strings.Contains(got[0], "3 Insufficient nvidia.com/gpu") {
		t.Fatalf("unschedulable pod: %v", got)
	}
	crashing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "entry-1", Namespace: "ml"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [jupyter]"},
		}, ContainerStatuses: []corev1.ContainerStatus{{Name: "jupyter", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}}}}}}
	got = PodProblems(crashing)
	if len(got) != 1 || !strings.Contains(got[0], "containers with unready status: [jupyter]") || !strings.Contains(got[0], "[CrashLoopBackOff]") {
		t.Fatalf("crashing pod: %v", got)
	}
	if r := PodReadiness(crashing); r.Ready {
		t.Fatalf("crashing pod ready")
	}
	done := crashing.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	if len(PodProblems(done)) != 0 || !PodReadiness(done).Ready {
		t.Fatalf("succeeded pod has problems")
	}
}

func TestNamespaceAndSecretReadiness(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	if !NamespaceReadiness(ns).Ready {
		t.Fatalf("active namespace not ready")
	}
	ns.Status.Phase = corev1.NamespaceTerminating
	if NamespaceReadiness(ns).Ready {
		t.Fatalf("terminating namespace ready")
	}
	tok := &corev1.Secret{Type: corev1.SecretTypeServiceAccountToken}
	if SecretReadiness(tok).Ready {
		t.Fatalf("empty token secret ready")
	}
	if !SecretReadiness(&corev1.Secret{Type: corev1.SecretTypeOpaque}).Ready {
		t.Fatalf("opaque secret not ready")
	}
}
