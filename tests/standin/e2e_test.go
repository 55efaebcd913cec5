//go:build e2e

package standin

import (
	"strings"
	"testing"
	"time"

	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func (e *e2e) configMap(name string, labels, data map[string]any) presource.PropertyMap {
	return props(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": e.namespace, "labels": labels},
		"data":     data,
	})
}

func TestE2EConfigMapLifecycle(t *testing.T) {
	e := newE2E(t)
	cms := e.kube.CoreV1().ConfigMaps(e.namespace)
	news := e.configMap("hostfile", map[string]any{"app": "ring"}, map[string]any{"hostfile": "w-0 slots=8"})

	// A preview is a server-side dry run: it returns the would-be object and creates nothing.
	inputs := e.check("kubernetes:core/v1:ConfigMap", "hostfile", nil, news)
	prev, err := e.p.Create(e.ctx, &pulumirpc.CreateRequest{Urn: e.urn("kubernetes:core/v1:ConfigMap", "hostfile"),
		Properties: inputs, Preview: true})
	if err != nil {
		t.Fatalf("preview create: %v", err)
	}
	if prev.Id != "" || e.unmarshal(prev.Properties)["metadata"].ObjectValue()["uid"].StringValue() == "" {
		t.Fatalf("preview: id %q, want \"\" and a dry-run object with a uid", prev.Id)
	}
	if _, err := cms.Get(e.ctx, "hostfile", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("preview created the ConfigMap (get: %v)", err)
	}

	rs := e.apply("kubernetes:core/v1:ConfigMap", "hostfile", news)
	if rs.id != e.namespace+"/hostfile" {
		t.Fatalf("id = %q", rs.id)
	}
	live, err := cms.Get(e.ctx, "hostfile", metav1.GetOptions{})
	if err != nil || live.Data["hostfile"] != "w-0 slots=8" {
		t.Fatalf("live ConfigMap: %v %v", live, err)
	}
	firstUID := live.UID
	var manager string
	for _, mf := range live.ManagedFields {
		if mf.Operation == metav1.ManagedFieldsOperationApply {
			manager = mf.Manager
		}
	}
	if !strings.HasPrefix(manager, "pulumi-kubernetes-") {
		t.Fatalf("applied by field manager %q, want pulumi-kubernetes-<hex>", manager)
	}

	// Same inputs: no diff (a second `pulumi up` changes nothing).
	d, _ := e.diff(rs, e.configMap("hostfile", map[string]any{"app": "ring"}, map[string]any{"hostfile": "w-0 slots=8"}))
	if d.Changes != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("unchanged inputs: %v %v", d.Changes, d.DetailedDiff)
	}

	// A label: updated in place.
	d, upd := e.diff(rs, e.configMap("hostfile", map[string]any{"app": "ring", "tier": "x"}, map[string]any{"hostfile": "w-0 slots=8"}))
	if d.Changes != pulumirpc.DiffResponse_DIFF_SOME || len(d.Replaces) != 0 || d.DetailedDiff["metadata.labels.tier"] == nil {
		t.Fatalf("label change: changes=%v replaces=%v diff=%v", d.Changes, d.Replaces, d.DetailedDiff)
	}
	e.update(rs, upd, true) // preview: dry run only
	if live, _ := cms.Get(e.ctx, "hostfile", metav1.GetOptions{}); live.Labels["tier"] != "" {
		t.Fatalf("preview update changed the object")
	}
	e.update(rs, upd, false)
	if live, _ := cms.Get(e.ctx, "hostfile", metav1.GetOptions{}); live.Labels["tier"] != "x" || live.UID != firstUID {
		t.Fatalf("update: labels %v uid %v", live.Labels, live.UID)
	}
	if d, _ := e.diff(rs, e.configMap("hostfile", map[string]any{"app": "ring", "tier": "x"}, map[string]any{"hostfile": "w-0 slots=8"})); d.Changes != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("after update, same inputs differ: %v", d.DetailedDiff)
	}

	// Data: replaced, deleting first because the name stays.
	newData := e.configMap("hostfile", map[string]any{"app": "ring", "tier": "x"}, map[string]any{"hostfile": "w-0 slots=4"})
	d, _ = e.diff(rs, newData)
	if len(d.Replaces) != 1 || d.Replaces[0] != "data.hostfile" || !d.DeleteBeforeReplace {
		t.Fatalf("data change: replaces=%v dbr=%v", d.Replaces, d.DeleteBeforeReplace)
	}
	e.delete(rs)
	if _, err := cms.Get(e.ctx, "hostfile", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete, get: %v", err)
	}
	rs = e.apply("kubernetes:core/v1:ConfigMap", "hostfile", newData)
	live, err = cms.Get(e.ctx, "hostfile", metav1.GetOptions{})
	if err != nil || live.UID == firstUID || live.Data["hostfile"] != "w-0 slots=4" {
		t.Fatalf("replacement: %v %v", live, err)
	}

	// Refresh sees drift made by hand.
	live.Data["hostfile"] = "edited by hand"
	if _, err := cms.Update(e.ctx, live, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	got := e.read(rs)
	if v := e.unmarshal(got.Properties)["data"].ObjectValue()["hostfile"].StringValue(); v != "edited by hand" {
		t.Fatalf("refresh: data.hostfile = %q", v)
	}

	e.delete(rs)
	if r := e.read(rs); r.Id != "" {
		t.Fatalf("read of a deleted object returned id %q, want it reported gone", r.Id)
	}
}

func (e *e2e) deploymentProps(taintKey, image string, replicas float64, requests map[string]any) presource.PropertyMap {
	container := map[string]any{"name": "jupyter", "image": image}
	if requests != nil {
		container["resources"] = map[string]any{"requests": requests, "limits": requests}
	}
	return props(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "entrypoint", "namespace": e.namespace},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "entrypoint"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "entrypoint"}},
				"spec":     e.podSpec(taintKey, []any{container}),
			},
		},
	})
}

func TestE2EDeploymentWaitsUntilAvailable(t *testing.T) {
	e := newE2E(t)
	taint := e.node(smallNode())
	start := time.Now()
	rs := e.apply("kubernetes:apps/v1:Deployment", "entrypoint", e.deploymentProps(taint, "jupyter/base-notebook:2024-01-01", 2, nil))
	out := e.unmarshal(rs.outputs)
	st := out["status"].ObjectValue()
	if st["availableReplicas"].NumberValue() != 2 || st["updatedReplicas"].NumberValue() != 2 {
		t.Fatalf("Create returned before the Deployment was available: status %v", st)
	}
	t.Logf("Deployment available after %v", time.Since(start))

	// A Service in front of it waits for endpoints.
	e.apply("kubernetes:core/v1:Service", "entrypoint", props(map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "entrypoint", "namespace": e.namespace},
		"spec": map[string]any{"selector": map[string]any{"app": "entrypoint"},
			"ports": []any{map[string]any{"name": "http", "port": float64(8888)}}},
	}))
	if !strings.Contains(e.host.all(), "Service initialization complete") {
		t.Fatalf("Service create did not report waiting for endpoints; log:\n%s", e.host.all())
	}

	// A rollout: new image; Update waits for the new ReplicaSet.
	d, upd := e.diff(rs, e.deploymentProps(taint, "jupyter/base-notebook:2024-02-01", 2, nil))
	if d.Changes != pulumirpc.DiffResponse_DIFF_SOME || len(d.Replaces) != 0 {
		t.Fatalf("image change: %v %v", d.Changes, d.Replaces)
	}
	e.update(rs, upd, false)
	dep, err := e.kube.AppsV1().Deployments(e.namespace).Get(e.ctx, "entrypoint", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status.UpdatedReplicas != 2 || dep.Status.AvailableReplicas < 2 || dep.Annotations[revisionAnnotation] != "2" {
		t.Fatalf("Update returned before the rollout finished: %+v", dep.Status)
	}

	// A Deployment that cannot schedule fails, saying why.
	bad := e.deploymentProps(taint, "jupyter/base-notebook:2024-02-01", 1, map[string]any{"nvidia.com/gpu": "1"})
	bad["metadata"].ObjectValue()["name"] = presource.NewStringProperty("gpu-hungry")
	bad["spec"].ObjectValue()["selector"] = presource.NewObjectProperty(props(map[string]any{"matchLabels": map[string]any{"app": "gpu-hungry"}}))
	bad["spec"].ObjectValue()["template"].ObjectValue()["metadata"] = presource.NewObjectProperty(props(map[string]any{"labels": map[string]any{"app": "gpu-hungry"}}))
	_, err = e.create("kubernetes:apps/v1:Deployment", "gpu-hungry", bad, 20)
	if err == nil {
		t.Fatalf("an unschedulable Deployment was reported ready")
	}
	reasons := failureReasons(err)
	if !strings.Contains(reasons, "timed out waiting to be Ready") || !strings.Contains(reasons, "nvidia.com/gpu") {
		t.Fatalf("failure does not say why; reasons:\n%s", reasons)
	}
	t.Logf("unschedulable Deployment failed with:\n%s", reasons)

	e.delete(rs)
	if _, err := e.kube.AppsV1().Deployments(e.namespace).Get(e.ctx, "entrypoint", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Delete returned before the Deployment was gone: %v", err)
	}
}

// failureReasons flattens an error and its ErrorResourceInitFailed reasons.
func failureReasons(err error) string {
	parts := []string{err.Error()}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if f, ok := d.(*pulumirpc.ErrorResourceInitFailed); ok {
				parts = append(parts, f.Reasons...)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// readUntilReady refreshes until the object's readiness check passes (a scaled workload is
// reported unready while its new Pods start).
func (e *e2e) readUntilReady(rs *resourceState) *pulumirpc.ReadResponse {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := e.p.Read(e.ctx, &pulumirpc.ReadRequest{Id: rs.id, Urn: e.urn(rs.token, rs.name), Properties: rs.outputs, Inputs: rs.inputs})
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("refresh of %s never succeeded: %v", rs.name, err)
		}
		time.Sleep(time.Second)
	}
}

func (e *e2e) jobProps(name, taintKey string, annotations map[string]any) presource.PropertyMap {
	md := map[string]any{"name": name, "namespace": e.namespace}
	if annotations != nil {
		md["annotations"] = annotations
	}
	spec := e.podSpec(taintKey, []any{map[string]any{"name": "mpirun", "image": "mpioperator/mpi-pi:openmpi"}})
	spec["restartPolicy"] = "Never"
	return props(map[string]any{
		"apiVersion": "batch/v1", "kind": "Job", "metadata": md,
		"spec": map[string]any{"backoffLimit": float64(0), "template": map[string]any{"spec": spec}},
	})
}

func TestE2EJobWaitsForCompletion(t *testing.T) {
	e := newE2E(t)
	taint := e.node(smallNode())
	rs := e.apply("kubernetes:batch/v1:Job", "launcher", e.jobProps("launcher", taint, nil))
	job, err := e.kube.BatchV1().Jobs(e.namespace).Get(e.ctx, "launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	complete := false
	for _, c := range job.Status.Conditions {
		if c.Type == "Complete" && c.Status == corev1.ConditionTrue {
			complete = true
		}
	}
	if !complete || job.Status.Succeeded != 1 {
		t.Fatalf("Create returned before the Job completed: %+v", job.Status)
	}
	if d, _ := e.diff(rs, e.jobProps("launcher", taint, nil)); d.Changes != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("completed Job differs from its inputs: %v", d.DetailedDiff)
	}

	// skipAwait: Create returns at once, before the Job can have completed.
	skipped := e.apply("kubernetes:batch/v1:Job", "skipped", e.jobProps("skipped", taint,
		map[string]any{annotationSkipAwait: "true"}))
	if st, ok := e.unmarshal(skipped.outputs)["status"]; ok && st.IsObject() {
		if s, ok := st.ObjectValue()["succeeded"]; ok && s.NumberValue() > 0 {
			t.Fatalf("skipAwait Job: status already succeeded, so the test proves nothing")
		}
	}
	e.delete(rs)
	e.delete(skipped)
}

func TestE2ESecretOutputsAreSecret(t *testing.T) {
	e := newE2E(t)
	const password = "correct-horse-battery-staple"
	news := presource.PropertyMap{
		"apiVersion": presource.NewStringProperty("v1"), "kind": presource.NewStringProperty("Secret"),
		"metadata": presource.NewObjectProperty(props(map[string]any{"name": "jupyter", "namespace": e.namespace})),
		"stringData": presource.NewObjectProperty(presource.PropertyMap{
			"password": presource.MakeSecret(presource.NewStringProperty(password)),
		}),
	}
	rs := e.apply("kubernetes:core/v1:Secret", "jupyter", news)
	out := e.unmarshal(rs.outputs)
	if !out["data"].IsSecret() {
		t.Fatalf("outputs data is not secret")
	}
	if !out[inputsKey].ObjectValue()["stringData"].IsSecret() && !out[inputsKey].ObjectValue()["data"].IsSecret() {
		t.Fatalf("__inputs keep the password in the clear")
	}
	if out["metadata"].IsSecret() {
		t.Fatalf("metadata was made secret")
	}
	if strings.Contains(e.host.all(), password) {
		t.Fatalf("the provider logged the secret value")
	}

	// Not marked secret by the program: a Secret's data is secret all the same.
	plain := e.apply("kubernetes:core/v1:Secret", "plain", props(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "plain", "namespace": e.namespace},
		"stringData": map[string]any{"token": "not-marked"},
	}))
	if !e.unmarshal(plain.outputs)["data"].IsSecret() {
		t.Fatalf("Secret data not secret when the input was plain")
	}
	if !e.unmarshal(e.read(rs).Properties)["data"].IsSecret() {
		t.Fatalf("refreshed Secret data is not secret")
	}
	if d, _ := e.diff(rs, news); d.Changes != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("unchanged Secret differs: %v", d.DetailedDiff)
	}
}

func TestE2EStatefulSetDriftIsShownAndReverted(t *testing.T) {
	e := newE2E(t)
	taint := e.node(smallNode())
	stsProps := func(replicas float64) presource.PropertyMap {
		return props(map[string]any{
			"apiVersion": "apps/v1", "kind": "StatefulSet",
			"metadata": map[string]any{"name": "workers", "namespace": e.namespace},
			"spec": map[string]any{
				"replicas": replicas, "serviceName": "workers", "podManagementPolicy": "Parallel",
				"selector": map[string]any{"matchLabels": map[string]any{"app": "workers"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "workers"}},
					"spec":     e.podSpec(taint, []any{map[string]any{"name": "w", "image": "horovod/horovod:0.28.1"}}),
				},
			},
		})
	}
	rs := e.apply("kubernetes:apps/v1:StatefulSet", "workers", stsProps(2))
	if ready := e.unmarshal(rs.outputs)["status"].ObjectValue()["readyReplicas"].NumberValue(); ready != 2 {
		t.Fatalf("Create returned with %v ready replicas", ready)
	}

	// Someone scales it by hand with `kubectl scale` (an Update of the scale subresource).
	_, err := e.kube.AppsV1().StatefulSets(e.namespace).Patch(e.ctx, "workers", types.MergePatchType,
		[]byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{FieldManager: "kubectl"}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	refreshed := e.readUntilReady(rs)
	if r := e.unmarshal(refreshed.Properties)["spec"].ObjectValue()["replicas"].NumberValue(); r != 3 {
		t.Fatalf("refresh shows spec.replicas %v, want the drifted 3", r)
	}
	rs.outputs, rs.inputs = refreshed.Properties, refreshed.Inputs
	d, upd := e.diff(rs, stsProps(2))
	if d.Changes != pulumirpc.DiffResponse_DIFF_SOME || d.DetailedDiff["spec.replicas"] == nil || len(d.Replaces) != 0 {
		t.Fatalf("drift not shown as an update of spec.replicas: %v %v", d.DetailedDiff, d.Replaces)
	}
	// As with the real provider, a field owned through the scale subresource is a conflict.
	_, err = e.p.Update(e.ctx, &pulumirpc.UpdateRequest{Id: rs.id, Urn: e.urn(rs.token, rs.name), Olds: rs.outputs, News: upd})
	if err == nil || !strings.Contains(failureReasons(err), "Server-Side Apply field conflict detected") ||
		!strings.Contains(failureReasons(err), "kubectl") {
		t.Fatalf("update over a kubectl scale: err = %v, want the apply conflict", err)
	}

	// Drift made by an ordinary update (kubectl edit) is taken over and reverted.
	_, err = e.kube.AppsV1().StatefulSets(e.namespace).Patch(e.ctx, "workers", types.MergePatchType,
		[]byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		t.Fatal(err)
	}
	refreshed = e.readUntilReady(rs)
	rs.outputs, rs.inputs = refreshed.Properties, refreshed.Inputs
	d, upd = e.diff(rs, stsProps(2))
	if d.DetailedDiff["spec.replicas"] == nil {
		t.Fatalf("kubectl edit drift not shown: %v", d.DetailedDiff)
	}
	e.update(rs, upd, false)
	sts, err := e.kube.AppsV1().StatefulSets(e.namespace).Get(e.ctx, "workers", metav1.GetOptions{})
	if err != nil || *sts.Spec.Replicas != 2 {
		t.Fatalf("update did not revert the drift: %v %v", sts.Spec.Replicas, err)
	}

	// serviceName is immutable: the diff says replace, deleting first.
	renamed := stsProps(2)
	renamed["spec"].ObjectValue()["serviceName"] = presource.NewStringProperty("workers-headless")
	if d, _ := e.diff(rs, renamed); len(d.Replaces) != 1 || d.Replaces[0] != "spec.serviceName" || !d.DeleteBeforeReplace {
		t.Fatalf("serviceName change: replaces=%v dbr=%v", d.Replaces, d.DeleteBeforeReplace)
	}
	e.delete(rs)
}

// TestE2EDeleteEndsWhenTheNameIsTakenAgain: a Delete returns once the object is gone, even when
// something makes an object of the same name at once (the simulated pools' controller remakes a
// Node that a stack moving to pools deletes). The watch sees the deletion; should the deletion
// fall between two watches (a re-list then finds the new object), the UID tells the new object
// from the old.
func TestE2EDeleteEndsWhenTheNameIsTakenAgain(t *testing.T) {
	e := newE2E(t)
	cms := e.kube.CoreV1().ConfigMaps(e.namespace)
	rs := e.apply("kubernetes:core/v1:ConfigMap", "phoenix", e.configMap("phoenix", nil, map[string]any{"a": "1"}))
	old, err := cms.Get(e.ctx, "phoenix", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=phoenix", ResourceVersion: old.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	remade := make(chan error, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == "DELETED" {
				_, err := cms.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "phoenix"}}, metav1.CreateOptions{})
				remade <- err
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { e.delete(rs); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Delete still waiting 30 s after the object was deleted and its name taken again")
	}
	if err := <-remade; err != nil {
		t.Fatalf("making the name again: %v", err)
	}
	if now, err := cms.Get(e.ctx, "phoenix", metav1.GetOptions{}); err != nil || now.UID == old.UID {
		t.Errorf("the new object: %v, uid %v (old %s)", err, now.GetUID(), old.UID)
	}
}
