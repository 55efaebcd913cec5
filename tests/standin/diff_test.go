package standin

import (
	"reflect"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func namespacedByTable(gvk schema.GroupVersionKind) (bool, error) {
	return !clusterScopedKinds[gvk.GroupKind()], nil
}

// checkpoint builds the state Create would have stored for inputs and the live object.
func checkpoint(inputs, live map[string]any) resource.PropertyMap {
	in := &unstructured.Unstructured{Object: inputs}
	return checkpointObject(in, &unstructured.Unstructured{Object: live}, resource.NewPropertyMapFromMap(inputs),
		in.GetAPIVersion(), "pulumi-kubernetes-0123abcd")
}

// served adds what the API server adds to an applied object.
func served(obj map[string]any, extra func(map[string]any)) map[string]any {
	out := deepCopy(obj).(map[string]any)
	md := out["metadata"].(map[string]any)
	md["uid"] = "9a4c2a5e-0000-4000-8000-000000000001"
	md["resourceVersion"] = "4711"
	md["creationTimestamp"] = "2025-01-01T00:00:00Z"
	md["generation"] = float64(1)
	md["managedFields"] = []any{map[string]any{"manager": "pulumi-kubernetes-0123abcd", "operation": "Apply"}}
	if extra != nil {
		extra(out)
	}
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

func configMap(data map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "ml"},
		"data":     data,
	}
}

func deployment(replicas float64, image string) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "entrypoint", "namespace": "ml", "labels": map[string]any{"app": "entry"}},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "entry"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "entry"}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "jupyter", "image": image,
					"resources": map[string]any{"requests": map[string]any{"cpu": "0.5"}},
				}}},
			},
		},
	}
}

// deploymentDefaults mimics API server defaulting and status on a Deployment.
func deploymentDefaults(o map[string]any) {
	spec := o["spec"].(map[string]any)
	spec["progressDeadlineSeconds"] = float64(600)
	spec["strategy"] = map[string]any{"type": "RollingUpdate"}
	tspec := spec["template"].(map[string]any)["spec"].(map[string]any)
	tspec["restartPolicy"] = "Always"
	tspec["dnsPolicy"] = "ClusterFirst"
	c := tspec["containers"].([]any)[0].(map[string]any)
	c["imagePullPolicy"] = "IfNotPresent"
	c["terminationMessagePath"] = "/dev/termination-log"
	c["resources"] = map[string]any{"requests": map[string]any{"cpu": "500m"}}
	o["status"] = map[string]any{"replicas": spec["replicas"], "readyReplicas": spec["replicas"]}
}

func job(image string) map[string]any {
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "launcher", "namespace": "ml"},
		"spec": map[string]any{
			"backoffLimit": float64(0),
			"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"containers":    []any{map[string]any{"name": "mpirun", "image": image}},
			}},
		},
	}
}

func statefulSet(serviceName string, replicas float64) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "workers", "namespace": "ml"},
		"spec": map[string]any{
			"serviceName": serviceName, "replicas": replicas, "podManagementPolicy": "Parallel",
			"selector": map[string]any{"matchLabels": map[string]any{"app": "w"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "w"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "w", "image": "horovod:0.28.1"}}},
			},
		},
	}
}

func mustDiff(t *testing.T, oldState resource.PropertyMap, news map[string]any, ignore []string, cmMutable bool) DiffResult {
	t.Helper()
	res, err := ComputeDiff(oldState, resource.NewPropertyMapFromMap(news), ignore, namespacedByTable, cmMutable, false)
	if err != nil {
		t.Fatalf("ComputeDiff: %v", err)
	}
	return res
}

func kinds(d map[string]*pulumirpc.PropertyDiff) map[string]pulumirpc.PropertyDiff_Kind {
	out := map[string]pulumirpc.PropertyDiff_Kind{}
	for k, v := range d {
		out[k] = v.Kind
	}
	return out
}

func TestDiffUnchangedInputsIsNone(t *testing.T) {
	for name, obj := range map[string]map[string]any{
		"configmap":   configMap(map[string]any{"hostfile": "w-0 slots=8"}),
		"deployment":  deployment(2, "jupyter:4.1"),
		"job":         job("mpi:5.0"),
		"statefulset": statefulSet("workers", 4),
	} {
		t.Run(name, func(t *testing.T) {
			extra := func(map[string]any) {}
			if name == "deployment" {
				extra = deploymentDefaults
			}
			res := mustDiff(t, checkpoint(obj, served(obj, extra)), deepCopy(obj).(map[string]any), nil, false)
			if res.Changes != pulumirpc.DiffResponse_DIFF_NONE || len(res.DetailedDiff) != 0 {
				t.Fatalf("unchanged %s: changes=%v diff=%v, want DIFF_NONE", name, res.Changes, kinds(res.DetailedDiff))
			}
		})
	}
}

func TestDiffConfigMapDataReplacesByDefault(t *testing.T) {
	old := configMap(map[string]any{"hostfile": "w-0 slots=8"})
	news := configMap(map[string]any{"hostfile": "w-0 slots=4"})
	res := mustDiff(t, checkpoint(old, served(old, nil)), news, nil, false)
	want := map[string]pulumirpc.PropertyDiff_Kind{"data.hostfile": pulumirpc.PropertyDiff_UPDATE_REPLACE}
	if !reflect.DeepEqual(kinds(res.DetailedDiff), want) {
		t.Fatalf("diff = %v, want %v", kinds(res.DetailedDiff), want)
	}
	if !reflect.DeepEqual(res.Replaces, []string{"data.hostfile"}) || !res.DeleteBeforeReplace {
		t.Fatalf("replaces=%v dbr=%v, want [data.hostfile] and delete-before-replace (same name)", res.Replaces, res.DeleteBeforeReplace)
	}

	mutable := mustDiff(t, checkpoint(old, served(old, nil)), configMap(map[string]any{"hostfile": "w-0 slots=4"}), nil, true)
	if len(mutable.Replaces) != 0 || mutable.Changes != pulumirpc.DiffResponse_DIFF_SOME {
		t.Fatalf("with enableConfigMapMutable: replaces=%v changes=%v, want an in-place update", mutable.Replaces, mutable.Changes)
	}
}

func TestDiffDeploymentReplicasUpdatesInPlace(t *testing.T) {
	old := deployment(2, "jupyter:4.1")
	res := mustDiff(t, checkpoint(old, served(old, deploymentDefaults)), deployment(3, "jupyter:4.1"), nil, false)
	want := map[string]pulumirpc.PropertyDiff_Kind{"spec.replicas": pulumirpc.PropertyDiff_UPDATE}
	if !reflect.DeepEqual(kinds(res.DetailedDiff), want) || len(res.Replaces) != 0 || res.DeleteBeforeReplace {
		t.Fatalf("diff=%v replaces=%v dbr=%v, want an in-place update of spec.replicas", kinds(res.DetailedDiff), res.Replaces, res.DeleteBeforeReplace)
	}
	// An image change in a Deployment's template is a rollout, not a replacement.
	res = mustDiff(t, checkpoint(old, served(old, deploymentDefaults)), deployment(2, "jupyter:4.2"), nil, false)
	want = map[string]pulumirpc.PropertyDiff_Kind{"spec.template.spec.containers[0].image": pulumirpc.PropertyDiff_UPDATE}
	if !reflect.DeepEqual(kinds(res.DetailedDiff), want) || len(res.Replaces) != 0 {
		t.Fatalf("diff=%v replaces=%v, want an in-place image update", kinds(res.DetailedDiff), res.Replaces)
	}
}

func TestDiffShowsDriftFromRefreshedLiveState(t *testing.T) {
	// Someone ran `kubectl scale --replicas=5`; refresh stored the live object.
	old := deployment(2, "jupyter:4.1")
	live := served(old, func(o map[string]any) {
		deploymentDefaults(o)
		o["spec"].(map[string]any)["replicas"] = float64(5)
	})
	res := mustDiff(t, checkpoint(old, live), deployment(2, "jupyter:4.1"), nil, false)
	want := map[string]pulumirpc.PropertyDiff_Kind{"spec.replicas": pulumirpc.PropertyDiff_UPDATE}
	if !reflect.DeepEqual(kinds(res.DetailedDiff), want) {
		t.Fatalf("diff = %v, want the drifted spec.replicas", kinds(res.DetailedDiff))
	}
	ignored := mustDiff(t, checkpoint(old, live), deployment(2, "jupyter:4.1"), []string{"spec.replicas"}, false)
	if ignored.Changes != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("ignoreChanges spec.replicas: diff = %v, want none", kinds(ignored.DetailedDiff))
	}
}

func TestDiffJobTemplateReplaces(t *testing.T) {
	old := job("mpi:5.0")
	res := mustDiff(t, checkpoint(old, served(old, nil)), job("mpi:5.1"), nil, false)
	want := map[string]pulumirpc.PropertyDiff_Kind{"spec.template.spec.containers[0].image": pulumirpc.PropertyDiff_UPDATE_REPLACE}
	if !reflect.DeepEqual(kinds(res.DetailedDiff), want) || !res.DeleteBeforeReplace {
		t.Fatalf("diff=%v dbr=%v, want replace of the Job's template, deleting first", kinds(res.DetailedDiff), res.DeleteBeforeReplace)
	}
}

func TestDiffStatefulSetImmutableFieldsReplace(t *testing.T) {
	old := statefulSet("workers", 4)
	res := mustDiff(t, checkpoint(old, served(old, nil)), statefulSet("workers-headless", 4), nil, false)
	if !reflect.DeepEqual(res.Replaces, []string{"spec.serviceName"}) {
		t.Fatalf("serviceName change: replaces = %v", res.Replaces)
	}
	res = mustDiff(t, checkpoint(old, served(old, nil)), statefulSet("workers", 8), nil, false)
	if len(res.Replaces) != 0 || kinds(res.DetailedDiff)["spec.replicas"] != pulumirpc.PropertyDiff_UPDATE {
		t.Fatalf("replicas change: diff=%v replaces=%v, want an update", kinds(res.DetailedDiff), res.Replaces)
	}
	withVCT := statefulSet("workers", 4)
	withVCT["spec"].(map[string]any)["volumeClaimTemplates"] = []any{map[string]any{
		"metadata": map[string]any{"name": "scratch"},
		"spec":     map[string]any{"accessModes": []any{"ReadWriteOnce"}},
	}}
	res = mustDiff(t, checkpoint(old, served(old, nil)), withVCT, nil, false)
	if !reflect.DeepEqual(res.Replaces, []string{"spec.volumeClaimTemplates"}) {
		t.Fatalf("volumeClaimTemplates added: replaces = %v", res.Replaces)
	}
}

func TestDiffRenameReplacesWithoutDeletingFirst(t *testing.T) {
	old := configMap(map[string]any{"a": "1"})
	news := configMap(map[string]any{"a": "1"})
	news["metadata"].(map[string]any)["name"] = "settings-v2"
	res := mustDiff(t, checkpoint(old, served(old, nil)), news, nil, false)
	if !reflect.DeepEqual(res.Replaces, []string{"metadata.name"}) || res.DeleteBeforeReplace {
		t.Fatalf("rename: replaces=%v dbr=%v, want replace of metadata.name, create-before-delete", res.Replaces, res.DeleteBeforeReplace)
	}
	moved := configMap(map[string]any{"a": "1"})
	moved["metadata"].(map[string]any)["namespace"] = "other"
	res = mustDiff(t, checkpoint(old, served(old, nil)), moved, nil, false)
	if !reflect.DeepEqual(res.Replaces, []string{"metadata.namespace"}) || res.DeleteBeforeReplace {
		t.Fatalf("namespace move: replaces=%v dbr=%v", res.Replaces, res.DeleteBeforeReplace)
	}
}

func TestDiffAutonamedReplacementDoesNotDeleteFirst(t *testing.T) {
	old := configMap(map[string]any{"a": "1"})
	old["metadata"].(map[string]any)["annotations"] = map[string]any{annotationAutonamed: "true"}
	news := deepCopy(old).(map[string]any)
	news["data"] = map[string]any{"a": "2"}
	res := mustDiff(t, checkpoint(old, served(old, nil)), news, nil, false)
	if len(res.Replaces) == 0 || res.DeleteBeforeReplace {
		t.Fatalf("autonamed: replaces=%v dbr=%v, want replace without delete-before-replace", res.Replaces, res.DeleteBeforeReplace)
	}
}

func TestDiffSecretDataReplacesUnlessMutable(t *testing.T) {
	secret := func(v string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata":   map[string]any{"name": "ssh", "namespace": "ml"},
			"stringData": map[string]any{"id_ed25519": v}}
	}
	old := secret("key-one")
	live := served(old, func(o map[string]any) {
		delete(o, "stringData")
		o["data"] = map[string]any{"id_ed25519": "a2V5LW9uZQ=="}
	})
	if res := mustDiff(t, checkpoint(old, live), secret("key-one"), nil, false); res.Changes != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("same stringData: diff = %v, want none", kinds(res.DetailedDiff))
	}
	res := mustDiff(t, checkpoint(old, live), secret("key-two"), nil, false)
	if !reflect.DeepEqual(res.Replaces, []string{"data.id_ed25519"}) {
		t.Fatalf("changed stringData: replaces = %v, want data.id_ed25519", res.Replaces)
	}
	mutable, err := ComputeDiff(checkpoint(old, live), resource.NewPropertyMapFromMap(secret("key-two")), nil,
		namespacedByTable, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(mutable.Replaces) != 0 || mutable.Changes != pulumirpc.DiffResponse_DIFF_SOME {
		t.Fatalf("enableSecretMutable: replaces=%v changes=%v", mutable.Replaces, mutable.Changes)
	}
}

func TestDiffDefaultNamespaceAndClusterScope(t *testing.T) {
	old := configMap(map[string]any{"a": "1"})
	delete(old["metadata"].(map[string]any), "namespace")
	live := served(old, func(o map[string]any) { o["metadata"].(map[string]any)["namespace"] = "default" })
	news := deepCopy(old).(map[string]any)
	news["metadata"].(map[string]any)["namespace"] = "default"
	if res := mustDiff(t, checkpoint(old, live), news, nil, false); res.Changes != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("explicit default namespace: diff = %v, want none", kinds(res.DetailedDiff))
	}
	sc := map[string]any{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
		"metadata": map[string]any{"name": "nfs"}, "provisioner": "nfs.csi.k8s.io"}
	scNews := deepCopy(sc).(map[string]any)
	scNews["provisioner"] = "efs.csi.aws.com"
	res := mustDiff(t, checkpoint(sc, served(sc, nil)), scNews, nil, false)
	if !reflect.DeepEqual(res.Replaces, []string{"provisioner"}) {
		t.Fatalf("StorageClass provisioner: replaces = %v", res.Replaces)
	}
}

func TestDiffUnknownValueIsAnUpdate(t *testing.T) {
	old := configMap(map[string]any{"a": "1"})
	old["metadata"].(map[string]any)["labels"] = map[string]any{"v": "1"}
	news := resource.NewPropertyMapFromMap(deepCopy(old).(map[string]any))
	news["metadata"].ObjectValue()["labels"].ObjectValue()["v"] = resource.MakeComputed(resource.NewStringProperty(""))
	res, err := ComputeDiff(checkpoint(old, served(old, nil)), news, nil, namespacedByTable, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if kinds(res.DetailedDiff)["metadata.labels.v"] != pulumirpc.PropertyDiff_UPDATE {
		t.Fatalf("unknown label: diff = %v, want metadata.labels.v updated", kinds(res.DetailedDiff))
	}
}

func TestPropertyPathString(t *testing.T) {
	cases := map[string][]any{
		"spec.template.spec.containers[0].image":       {"spec", "template", "spec", "containers", 0, "image"},
		`metadata.annotations["pulumi.com/skipAwait"]`: {"metadata", "annotations", "pulumi.com/skipAwait"},
		"data": {"data"},
	}
	for want, path := range cases {
		if got := propertyPathString(path); got != want {
			t.Errorf("propertyPathString(%v) = %q, want %q", path, got, want)
		}
	}
}
