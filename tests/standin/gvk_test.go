package standin

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestGVKFromToken(t *testing.T) {
	cases := []struct {
		token   string
		want    schema.GroupVersionKind
		version string
	}{
		{"kubernetes:core/v1:Namespace", schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "v1"},
		{"kubernetes:apps/v1:StatefulSet", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "apps/v1"},
		{"kubernetes:batch/v1:Job", schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "batch/v1"},
		{"kubernetes:networking.k8s.io/v1:NetworkPolicy",
			schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, "networking.k8s.io/v1"},
		{"kubernetes:policy/v1:PodDisruptionBudget",
			schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, "policy/v1"},
		{"kubernetes:rbac.authorization.k8s.io/v1:Role",
			schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, "rbac.authorization.k8s.io/v1"},
		{"kubernetes:storage.k8s.io/v1:StorageClass",
			schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, "storage.k8s.io/v1"},
	}
	for _, c := range cases {
		got, err := GVKFromToken(c.token)
		if err != nil {
			t.Fatalf("GVKFromToken(%q): %v", c.token, err)
		}
		if got != c.want {
			t.Errorf("GVKFromToken(%q) = %v, want %v", c.token, got, c.want)
		}
		if v := APIVersion(got); v != c.version {
			t.Errorf("APIVersion(%v) = %q, want %q", got, v, c.version)
		}
	}
}

func TestGVKFromTokenRejectsMalformed(t *testing.T) {
	for _, tok := range []string{
		"kubernetes:v1:Namespace",          // no group
		"aws:s3/bucket:Bucket",             // another package
		"kubernetes:apps/v1",               // no kind
		"kubernetes:apps/v1:",              // empty kind
		"pulumi:providers:kubernetes:what", // too many parts
	} {
		if _, err := GVKFromToken(tok); err == nil {
			t.Errorf("GVKFromToken(%q) succeeded, want an error", tok)
		}
	}
}

func TestFqNameRoundTrip(t *testing.T) {
	for _, c := range []struct{ ns, name, id string }{{"ns", "x", "ns/x"}, {"", "cluster-wide", "cluster-wide"}} {
		if got := fqName(c.ns, c.name); got != c.id {
			t.Errorf("fqName(%q, %q) = %q, want %q", c.ns, c.name, got, c.id)
		}
		ns, name := parseFqName(c.id)
		if ns != c.ns || name != c.name {
			t.Errorf("parseFqName(%q) = %q, %q", c.id, ns, name)
		}
	}
}
