package standin

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func secretString(s string) resource.PropertyValue {
	return resource.MakeSecret(resource.NewStringProperty(s))
}

func TestSecretKindDataIsAlwaysSecret(t *testing.T) {
	// Even when the program did not mark them secret, a Secret's data and stringData are.
	inputs := map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "ssh", "namespace": "ml"}, "data": map[string]any{"k": "dg=="}}
	live := served(inputs, nil)
	state := checkpointObject(&unstructured.Unstructured{Object: inputs}, &unstructured.Unstructured{Object: live},
		resource.NewPropertyMapFromMap(inputs), "v1", "m")
	if !state["data"].IsSecret() {
		t.Errorf("outputs data is not secret")
	}
	if !state[inputsKey].ObjectValue()["data"].IsSecret() {
		t.Errorf("__inputs data is not secret")
	}
	if state["metadata"].IsSecret() || state["kind"].IsSecret() {
		t.Errorf("non-secret fields were made secret")
	}
}

func TestStringDataSecretnessCarriesToData(t *testing.T) {
	fromInputs := resource.PropertyMap{
		"apiVersion": resource.NewStringProperty("v1"), "kind": resource.NewStringProperty("Secret"),
		"metadata":   resource.NewObjectProperty(resource.PropertyMap{"name": resource.NewStringProperty("jupyter")}),
		"stringData": resource.NewObjectProperty(resource.PropertyMap{"password": secretString("hunter2")}),
	}
	inputs := propMapToUnstructured(fromInputs)
	if got := inputs.Object["stringData"].(map[string]any)["password"]; got != "hunter2" {
		t.Fatalf("secret not unwrapped for the API server: %v", got)
	}
	live := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "jupyter"}, "data": map[string]any{"password": "aHVudGVyMg=="}}}
	state := checkpointObject(inputs, live, fromInputs, "v1", "m")
	if !state["data"].IsSecret() {
		t.Fatalf("data derived from secret stringData is not secret")
	}
	// The secret survives the wire: marshalled with secrets kept, it comes back a secret.
	s, err := plugin.MarshalProperties(state, plugin.MarshalOptions{KeepSecrets: true, SkipNulls: true})
	if err != nil {
		t.Fatal(err)
	}
	back, err := plugin.UnmarshalProperties(s, plugin.MarshalOptions{KeepSecrets: true, SkipNulls: true})
	if err != nil {
		t.Fatal(err)
	}
	if !back["data"].IsSecret() || !back[inputsKey].ObjectValue()["stringData"].IsSecret() {
		t.Fatalf("secretness lost on the wire: data secret=%v", back["data"].IsSecret())
	}
	if !strings.Contains(s.String(), "aHVudGVyMg==") {
		// The value is present (it is the state), but wrapped in the secret signature.
		t.Fatalf("marshalled state lacks the data value")
	}
	if !strings.Contains(s.String(), resource.SecretSig) {
		t.Fatalf("marshalled state carries no secret signature")
	}
}

func TestInputSecretStaysSecretInOutputs(t *testing.T) {
	// A Deployment with one secret env value: the containers array is secret in the outputs.
	env := resource.NewArrayProperty([]resource.PropertyValue{resource.NewObjectProperty(resource.PropertyMap{
		"name": resource.NewStringProperty("JUPYTER_TOKEN"), "value": secretString("s3cret"),
	})})
	container := resource.NewObjectProperty(resource.PropertyMap{
		"name": resource.NewStringProperty("jupyter"), "image": resource.NewStringProperty("jupyter:4.1"), "env": env,
	})
	fromInputs := resource.PropertyMap{
		"apiVersion": resource.NewStringProperty("apps/v1"), "kind": resource.NewStringProperty("Deployment"),
		"metadata": resource.NewObjectProperty(resource.PropertyMap{"name": resource.NewStringProperty("entry")}),
		"spec": resource.NewObjectProperty(resource.PropertyMap{"template": resource.NewObjectProperty(resource.PropertyMap{
			"spec": resource.NewObjectProperty(resource.PropertyMap{
				"containers": resource.NewArrayProperty([]resource.PropertyValue{container}),
			}),
		})}),
	}
	inputs := propMapToUnstructured(fromInputs)
	live := served(inputs.Object, deploymentDefaultsNoReplicas)
	state := checkpointObject(inputs, &unstructured.Unstructured{Object: live}, fromInputs, "apps/v1", "m")
	containers := state["spec"].ObjectValue()["template"].ObjectValue()["spec"].ObjectValue()["containers"]
	if !containers.IsSecret() {
		t.Fatalf("containers holding a secret env value are not secret in the outputs")
	}
	if state["spec"].ObjectValue()["template"].ObjectValue()["spec"].ObjectValue()["restartPolicy"].IsSecret() {
		t.Fatalf("unrelated server-defaulted field was made secret")
	}
}

func deploymentDefaultsNoReplicas(o map[string]any) {
	o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["restartPolicy"] = "Always"
}

func TestNormalizeInputs(t *testing.T) {
	in := &unstructured.Unstructured{Object: deployment(2, "jupyter:4.1")}
	in.Object["metadata"].(map[string]any)["uid"] = "x"
	in.Object["metadata"].(map[string]any)["resourceVersion"] = "1"
	out := normalizeInputs(in)
	c := out.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if cpu := c["resources"].(map[string]any)["requests"].(map[string]any)["cpu"]; cpu != "500m" {
		t.Errorf("cpu 0.5 normalised to %v, want 500m", cpu)
	}
	if _, ok := c["terminationMessagePath"]; ok {
		t.Errorf("normalisation added a field the inputs did not have")
	}
	if _, ok := out.Object["metadata"].(map[string]any)["uid"]; ok {
		t.Errorf("read-only metadata.uid kept")
	}
	sec := normalizeInputs(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "s"}, "stringData": map[string]any{"k": "v"}}})
	if _, ok := sec.Object["stringData"]; ok || sec.Object["data"].(map[string]any)["k"] != "dg==" {
		t.Errorf("Secret stringData not folded into data: %v", sec.Object)
	}
}

func TestPruneKeepsOnlyInputShape(t *testing.T) {
	live := map[string]any{"a": map[string]any{"b": float64(1), "c": "server"}, "list": []any{
		map[string]any{"x": "1", "y": "server"}, map[string]any{"x": "2"}}, "status": map[string]any{}}
	inputs := map[string]any{"a": map[string]any{"b": float64(2)}, "list": []any{map[string]any{"x": "9"}}}
	got := pruneMap(live, inputs)
	want := map[string]any{"a": map[string]any{"b": float64(1)}, "list": []any{map[string]any{"x": "1"}}}
	if !jsonEqual(got, want) {
		t.Fatalf("pruneMap = %v, want %v", got, want)
	}
}

func TestCheckFillsTypeNamespaceAutonameAndKeepsSecrets(t *testing.T) {
	p := New(nil)
	p.enableSecrets = true
	p.unreachable = true // no cluster: scope comes from the built-in table
	p.defaultNamespace = "ml"
	news := resource.PropertyMap{
		"metadata": resource.NewObjectProperty(resource.PropertyMap{}),
		"data":     resource.NewObjectProperty(resource.PropertyMap{"token": secretString("abc")}),
	}
	s, err := plugin.MarshalProperties(news, plugin.MarshalOptions{KeepSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	urn := resource.NewURN("dev", "kolotoc", "", "kubernetes:core/v1:ConfigMap", "hostfile")
	resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{Urn: string(urn), News: s, RandomSeed: []byte("seed")})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Failures) != 0 {
		t.Fatalf("failures: %v", resp.Failures)
	}
	got, err := plugin.UnmarshalProperties(resp.Inputs, plugin.MarshalOptions{KeepSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	obj := propMapToUnstructured(got)
	if obj.GetAPIVersion() != "v1" || obj.GetKind() != "ConfigMap" {
		t.Errorf("apiVersion/kind = %q/%q, want v1/ConfigMap", obj.GetAPIVersion(), obj.GetKind())
	}
	if obj.GetNamespace() != "ml" {
		t.Errorf("namespace = %q, want the provider default ml", obj.GetNamespace())
	}
	if !strings.HasPrefix(obj.GetName(), "hostfile-") || len(obj.GetName()) != len("hostfile-")+8 {
		t.Errorf("autoname = %q, want hostfile-<8 hex>", obj.GetName())
	}
	if obj.GetAnnotations()[annotationAutonamed] != "true" {
		t.Errorf("autonamed annotation missing")
	}
	if !got["data"].ObjectValue()["token"].IsSecret() && !got["data"].IsSecret() {
		t.Errorf("secret input lost its secretness in Check")
	}

	// Same seed, same name: previews stay stable.
	resp2, err := p.Check(context.Background(), &pulumirpc.CheckRequest{Urn: string(urn), News: s, RandomSeed: []byte("seed")})
	if err != nil {
		t.Fatal(err)
	}
	got2, _ := plugin.UnmarshalProperties(resp2.Inputs, plugin.MarshalOptions{KeepSecrets: true})
	if propMapToUnstructured(got2).GetName() != obj.GetName() {
		t.Errorf("autoname not deterministic for one seed")
	}

	// A cluster-scoped kind gets no namespace.
	nsURN := resource.NewURN("dev", "kolotoc", "", "kubernetes:core/v1:Namespace", "ml")
	nsNews, _ := plugin.MarshalProperties(resource.PropertyMap{"metadata": resource.NewObjectProperty(resource.PropertyMap{
		"name": resource.NewStringProperty("ml")})}, plugin.MarshalOptions{})
	nsResp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{Urn: string(nsURN), News: nsNews})
	if err != nil {
		t.Fatal(err)
	}
	nsGot, _ := plugin.UnmarshalProperties(nsResp.Inputs, plugin.MarshalOptions{})
	if ns := propMapToUnstructured(nsGot).GetNamespace(); ns != "" {
		t.Errorf("Namespace object got namespace %q", ns)
	}
}

func TestCheckRejectsListAndDisabledAutonaming(t *testing.T) {
	p := New(nil)
	p.unreachable = true
	empty, _ := plugin.MarshalProperties(resource.PropertyMap{}, plugin.MarshalOptions{})
	list := resource.NewURN("dev", "kolotoc", "", "kubernetes:core/v1:ConfigMapList", "x")
	if _, err := p.Check(context.Background(), &pulumirpc.CheckRequest{Urn: string(list), News: empty}); err == nil {
		t.Errorf("List kind accepted")
	}
	cm := resource.NewURN("dev", "kolotoc", "", "kubernetes:core/v1:ConfigMap", "x")
	_, err := p.Check(context.Background(), &pulumirpc.CheckRequest{Urn: string(cm), News: empty,
		Autonaming: &pulumirpc.CheckRequest_AutonamingOptions{Mode: pulumirpc.CheckRequest_AutonamingOptions_DISABLE}})
	if err == nil || !strings.Contains(err.Error(), "autonaming is disabled") {
		t.Errorf("disabled autonaming: err = %v", err)
	}
	resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{Urn: string(cm), News: empty,
		Autonaming: &pulumirpc.CheckRequest_AutonamingOptions{Mode: pulumirpc.CheckRequest_AutonamingOptions_ENFORCE, ProposedName: "exact"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := plugin.UnmarshalProperties(resp.Inputs, plugin.MarshalOptions{})
	if n := propMapToUnstructured(got).GetName(); n != "exact" {
		t.Errorf("enforced autoname = %q, want exact", n)
	}
}

func TestPreviewWithUnknownKubeconfigNeedsNoCluster(t *testing.T) {
	p := New(nil)
	ctx := context.Background()
	resp, err := p.Configure(ctx, &pulumirpc.ConfigureRequest{AcceptSecrets: true, Variables: map[string]string{
		"kubernetes:config:kubeconfig": plugin.UnknownStringValue,
		"kubernetes:config:namespace":  "ml",
	}})
	if err != nil {
		t.Fatalf("Configure with an unknown kubeconfig: %v", err)
	}
	if !resp.AcceptSecrets || !resp.AcceptResources || !resp.SupportsPreview {
		t.Fatalf("Configure response = %+v", resp)
	}
	if _, unreachable, _ := p.state(); !unreachable {
		t.Fatalf("an unknown kubeconfig must leave the cluster unreachable")
	}
	urn := resource.NewURN("dev", "kolotoc", "", "kubernetes:apps/v1:Deployment", "entry")
	news, _ := plugin.MarshalProperties(resource.PropertyMap{
		"metadata": resource.NewObjectProperty(resource.PropertyMap{"name": resource.NewStringProperty("entry")}),
		"spec":     resource.NewObjectProperty(resource.PropertyMap{"replicas": resource.NewNumberProperty(2)}),
	}, plugin.MarshalOptions{})
	checked, err := p.Check(ctx, &pulumirpc.CheckRequest{Urn: string(urn), News: news})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := plugin.UnmarshalProperties(checked.Inputs, plugin.MarshalOptions{})
	if ns := propMapToUnstructured(got).GetNamespace(); ns != "ml" {
		t.Fatalf("namespace in preview = %q, want the configured ml", ns)
	}
	prev, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: string(urn), Properties: checked.Inputs, Preview: true})
	if err != nil {
		t.Fatalf("preview Create without a cluster: %v", err)
	}
	if prev.Id != "" || !reflect.DeepEqual(prev.Properties.AsMap(), checked.Inputs.AsMap()) {
		t.Fatalf("preview Create should echo the inputs: %v", prev.Properties.AsMap())
	}
	if _, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: string(urn), Properties: checked.Inputs}); err == nil ||
		!strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("real Create without a cluster: err = %v", err)
	}
}
