package tests

import (
	"os"
	"strings"
	"testing"
)

// TestRecoveryDocumented: every cloud resource type a cloud stack registers (pools pinned or not,
// backups on) has its import line in docs/recovery.md, the page an interrupted update sends the
// user to: the type token and its import ID's format.
func TestRecoveryDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/recovery.md")
	if err != nil {
		t.Fatal(err)
	}
	backups := map[string]string{
		"aws":   `{"type":"efs","tier":"elastic","backup":{"enabled":true}}`,
		"azure": `{"type":"azurefiles","protocol":"nfs","privateEndpoint":true,"size":"1Ti","protect":true,"backup":{"enabled":true}}`,
	}
	seen := map[string]bool{}
	for _, s := range cloudStacks {
		for _, ov := range []map[string]string{nil, {"storage": backups[s.name]}} {
			if ov != nil && ov["storage"] == "" {
				continue
			}
			for _, r := range deploy(t, cloudRaw(t, s.name, ov)).sorted() {
				if strings.HasPrefix(r.Type, "pulumi:") || strings.HasPrefix(r.Type, "kolotoc:") || strings.HasPrefix(r.Type, "kubernetes:") || seen[r.Type] {
					continue
				}
				seen[r.Type] = true
				if !strings.Contains(string(doc), "pulumi import "+r.Type+" ") {
					t.Errorf("docs/recovery.md has no `pulumi import %s …` line (registered as %s)", r.Type, r.Name)
				}
			}
		}
	}
	if len(seen) < 20 {
		t.Errorf("only %d cloud types seen", len(seen))
	}
}
