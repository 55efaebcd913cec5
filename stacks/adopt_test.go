package stacks

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"strings"
	"testing"
)

// A namespace that exists is taken only when it is the stack's, or adopted by name; an adopted
// one is kept on destroy. The labels are those the stack puts on its namespace (isolation.Render).
func TestNamespaceAdoption(t *testing.T) {
	ours := map[string]string{"app.kubernetes.io/name": "kolotoc", "app.kubernetes.io/instance": "dev"}
	other := map[string]string{"app.kubernetes.io/name": "kolotoc", "app.kubernetes.io/instance": "prod"}
	team := map[string]string{"team": "vision"}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kolotoc-dev", errors.New("no get"))
	for _, tc := range []struct {
		name    string
		cloud   string
		adopt   bool
		exists  map[string]map[string]string // namespace → labels
		lookErr error
		update  bool // pulumi up, not a preview
		retain  bool
		wantErr string
	}{
		{name: "new namespace", cloud: CloudSimulated},
		{name: "the stack's own", cloud: CloudSimulated, exists: map[string]map[string]string{"kolotoc-dev": ours}},
		{name: "another team's", cloud: CloudExisting, exists: map[string]map[string]string{"kolotoc-dev": team}, wantErr: "exists and is not this stack's"},
		{name: "another stack's", cloud: CloudExisting, exists: map[string]map[string]string{"kolotoc-dev": other}, wantErr: "belongs to the Kolotoc stack prod"},
		{name: "adopted by name", cloud: CloudExisting, adopt: true, exists: map[string]map[string]string{"kolotoc-dev": team}, retain: true},
		{name: "adopt set, none there", cloud: CloudExisting, adopt: true, retain: true},
		{name: "the agents' namespace taken", cloud: CloudSimulated, exists: map[string]map[string]string{"kolotoc-dev-gpu-agents": team}, wantErr: "GPU agents' namespace kolotoc-dev-gpu-agents"},
		{name: "unreadable in a preview: warned, not refused", cloud: CloudExisting, lookErr: errors.New("forbidden")},
		// An update fails closed: the namespace it cannot see may be someone else's.
		{name: "refused the read in an update: refused", cloud: CloudExisting, lookErr: forbidden, update: true, wantErr: "could not check whether it already exists (namespaces \"kolotoc-dev\" is forbidden"},
		{name: "refused the read in an update, adopt set", cloud: CloudExisting, lookErr: forbidden, update: true, adopt: true, retain: true},
		// A cluster that does not answer fails the update at the provider: warned here.
		{name: "unreachable in an update: warned", cloud: CloudExisting, lookErr: errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), update: true},
		{name: "a cloud's own cluster is not looked at", cloud: "gcp", lookErr: errors.New("must not be called")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{Stack: "dev", Cloud: tc.cloud, Namespace: "kolotoc-dev", AdoptNamespace: tc.adopt}
			on := true
			c.DevicePlugin.Enabled = &on
			if c.GPUAgentsNamespace() != "kolotoc-dev-gpu-agents" {
				t.Fatalf("GPU agents' namespace %q: the test's stack lacks one", c.GPUAgentsNamespace())
			}
			var warned []string
			retain, err := checkNamespaceAdoption(c, func(name string) (map[string]string, bool, error) {
				if tc.cloud == "gcp" {
					t.Fatal("looked up a namespace of a cluster the stack creates")
				}
				l, ok := tc.exists[name]
				return l, ok, tc.lookErr
			}, !tc.update, func(m string) { warned = append(warned, m) })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "adoptNamespace")):
				t.Fatalf("error %v, want one saying %q and naming kolotoc:adoptNamespace", err, tc.wantErr)
			case retain != tc.retain:
				t.Errorf("retain on destroy %v, want %v", retain, tc.retain)
			case tc.lookErr != nil && tc.cloud != "gcp" && tc.wantErr == "" && len(warned) == 0:
				t.Error("a namespace that could not be looked at was not warned about")
			}
		})
	}
}
