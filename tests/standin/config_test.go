package standin

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const kubeconfigA = `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:6443"}
- name: other
  cluster: {server: "https://127.0.0.1:7443"}
contexts:
- name: local
  context: {cluster: local, user: admin}
- name: other
  context: {cluster: other, user: admin}
current-context: local
users:
- name: admin
  user: {token: "t"}
`

func cfg(kv map[string]resource.PropertyValue) resource.PropertyMap {
	pm := resource.PropertyMap{}
	for k, v := range kv {
		pm[resource.PropertyKey(k)] = v
	}
	return pm
}

func str(s string) resource.PropertyValue { return resource.NewStringProperty(s) }

func TestDiffProviderConfig(t *testing.T) {
	base := cfg(map[string]resource.PropertyValue{"kubeconfig": str(kubeconfigA), "namespace": str("ml")})
	cases := []struct {
		name     string
		news     resource.PropertyMap
		changes  pulumirpc.DiffResponse_DiffChanges
		replaces []string
	}{
		{"unchanged", base.Copy(), pulumirpc.DiffResponse_DIFF_NONE, nil},
		{"namespace only", cfg(map[string]resource.PropertyValue{"kubeconfig": str(kubeconfigA), "namespace": str("ml2")}),
			pulumirpc.DiffResponse_DIFF_SOME, nil},
		{"context points at another cluster", cfg(map[string]resource.PropertyValue{"kubeconfig": str(kubeconfigA),
			"namespace": str("ml"), "context": str("other")}), pulumirpc.DiffResponse_DIFF_SOME, []string{"context"}},
		{"kubeconfig unknown", cfg(map[string]resource.PropertyValue{"kubeconfig": resource.MakeComputed(str("")),
			"namespace": str("ml")}), pulumirpc.DiffResponse_DIFF_SOME, []string{"kubeconfig"}},
	}
	for _, c := range cases {
		resp, err := DiffProviderConfig(base, c.news)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if resp.Changes != c.changes || !reflect.DeepEqual(resp.Replaces, c.replaces) {
			t.Errorf("%s: changes=%v replaces=%v, want %v %v", c.name, resp.Changes, resp.Replaces, c.changes, c.replaces)
		}
	}
}

func TestDiffProviderConfigKubeconfigServerChangeAndIdentifier(t *testing.T) {
	moved := strings.Replace(kubeconfigA, "6443", "9443", 1)
	olds := cfg(map[string]resource.PropertyValue{"kubeconfig": str(kubeconfigA)})
	news := cfg(map[string]resource.PropertyValue{"kubeconfig": str(moved)})
	resp, err := DiffProviderConfig(olds, news)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resp.Replaces, []string{"kubeconfig"}) {
		t.Fatalf("server moved: replaces = %v, want [kubeconfig]", resp.Replaces)
	}
	// A pinned, unchanged clusterIdentifier says it is the same cluster: no replacement.
	olds["clusterIdentifier"], news["clusterIdentifier"] = str("dev"), str("dev")
	resp, err = DiffProviderConfig(olds, news)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Replaces) != 0 || resp.Changes != pulumirpc.DiffResponse_DIFF_SOME {
		t.Fatalf("same identifier: changes=%v replaces=%v", resp.Changes, resp.Replaces)
	}
	news["clusterIdentifier"] = str("prod")
	resp, err = DiffProviderConfig(olds, news)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resp.Replaces, []string{"clusterIdentifier", "kubeconfig"}) {
		t.Fatalf("changed identifier: replaces = %v", resp.Replaces)
	}
}

func TestParseKubeconfigPathOrContents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfigA), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{"path": path, "yaml": kubeconfigA,
		"json": `{"apiVersion":"v1","kind":"Config","clusters":[{"name":"local","cluster":{"server":"https://127.0.0.1:6443"}}],` +
			`"contexts":[{"name":"local","context":{"cluster":"local","user":"admin"}}],"current-context":"local","users":[{"name":"admin","user":{"token":"t"}}]}`} {
		c, err := parseKubeconfig(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		active, ok := activeCluster(c, "", "")
		if !ok || active.Server != "https://127.0.0.1:6443" {
			t.Errorf("%s: active cluster = %+v, %v", name, active, ok)
		}
	}
	if _, err := parseKubeconfig("04da6b54-80e4-46f7-96ec-b56ff0331ba9"); err == nil {
		t.Errorf("an unknown-value sentinel parsed as a kubeconfig")
	}
}

func TestCheckProviderConfigStrictMode(t *testing.T) {
	urn := resource.NewURN("dev", "kolotoc", "", "pulumi:providers:kubernetes", "cluster")
	if f := CheckProviderConfig(urn, cfg(map[string]resource.PropertyValue{"kubeconfig": str(kubeconfigA)})); len(f) != 0 {
		t.Fatalf("non-strict config failed: %v", f)
	}
	f := CheckProviderConfig(urn, cfg(map[string]resource.PropertyValue{"strictMode": str("true")}))
	if len(f) != 2 {
		t.Fatalf("strict mode without kubeconfig/context: %v", f)
	}
	def := resource.NewURN("dev", "kolotoc", "", "pulumi:providers:kubernetes", "default_4_27_0")
	if f := CheckProviderConfig(def, cfg(map[string]resource.PropertyValue{"strictMode": str("true"),
		"kubeconfig": str(kubeconfigA), "context": str("local")})); len(f) != 1 {
		t.Fatalf("strict mode must refuse the default provider: %v", f)
	}
	if f := CheckProviderConfig(urn, cfg(map[string]resource.PropertyValue{"renderYamlToDirectory": str("out")})); len(f) != 1 {
		t.Fatalf("renderYamlToDirectory accepted: %v", f)
	}
}

func TestAwaitSettingsFromAnnotations(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		annotationSkipAwait: "true", annotationTimeoutSeconds: "42", annotationDeletionPropagation: "background",
	}}}}
	if !SkipAwait(obj) {
		t.Errorf("skipAwait annotation ignored")
	}
	if got := resourceTimeout(0, obj, time.Minute); got != 42*time.Second {
		t.Errorf("timeout from annotation = %v", got)
	}
	if got := resourceTimeout(90, obj, time.Minute); got != 90*time.Second {
		t.Errorf("customTimeouts must win over the annotation: %v", got)
	}
	if got := resourceTimeout(0, &unstructured.Unstructured{Object: map[string]any{}}, time.Minute); got != time.Minute {
		t.Errorf("default timeout = %v", got)
	}
	if got := deletionPropagation(obj); got != "Background" {
		t.Errorf("propagation = %v", got)
	}
	if got := deletionPropagation(&unstructured.Unstructured{Object: map[string]any{}}); got != "Foreground" {
		t.Errorf("default propagation = %v, want Foreground", got)
	}
	if !skipAwaitOnDelete(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) ||
		skipAwaitOnDelete(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}) {
		t.Errorf("skipAwait-on-delete kinds wrong")
	}
	live := &unstructured.Unstructured{Object: map[string]any{}}
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate}})
	if patchForce(&unstructured.Unstructured{Object: map[string]any{}}, live, false) ||
		patchForce(&unstructured.Unstructured{Object: map[string]any{}}, live, true) {
		t.Errorf("update forced over kubectl's fields without annotation")
	}
	if !patchForce(&unstructured.Unstructured{Object: map[string]any{}}, &unstructured.Unstructured{Object: map[string]any{}}, false) {
		t.Errorf("object without managed fields not taken over")
	}
	if !patchForce(&unstructured.Unstructured{Object: map[string]any{}}, nil, true) {
		t.Errorf("preview of a create not forced")
	}
}
