package main

import (
	"crypto/x509"
	"encoding/pem"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestManifests runs over the pinned module's own manifests (testbed/tools/kueue): every webhook
// reaches the loopback with the generated CA, and only Kueue's own kinds are called for objects
// without a queue: a pod of a stack without a queue must not wait on Kueue (nor fail when it is
// down).
func TestManifests(t *testing.T) {
	out, err := exec.Command("go", "-C", "../../tools/kueue", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("the Kueue module is not in the module cache: %v", err)
	}
	module := strings.TrimSpace(string(out))
	caPEM, certPEM, _, err := Certificates(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Manifests(module, 9443, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	crds, hooks, podHook := 0, 0, false
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj struct {
			Kind     string
			Webhooks []struct {
				Name         string
				ClientConfig struct {
					URL      string
					CABundle []byte
					Service  any
				}
				ObjectSelector *struct {
					MatchExpressions []struct{ Key, Operator string }
				}
				Rules []struct{ APIGroups []string }
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "CustomResourceDefinition":
			crds++
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			for _, h := range obj.Webhooks {
				hooks++
				if !strings.HasPrefix(h.ClientConfig.URL, "https://127.0.0.1:9443/") || h.ClientConfig.Service != nil {
					t.Errorf("webhook %s: clientConfig url %q, service %v", h.Name, h.ClientConfig.URL, h.ClientConfig.Service)
				}
				if string(h.ClientConfig.CABundle) != string(caPEM) {
					t.Errorf("webhook %s: caBundle is not the generated CA", h.Name)
				}
				own := h.Rules[0].APIGroups[0] == "kueue.x-k8s.io"
				selected := h.ObjectSelector != nil && h.ObjectSelector.MatchExpressions[0].Key == QueueLabel
				if own == selected {
					t.Errorf("webhook %s (Kueue's own kind: %v): queue-label objectSelector %v", h.Name, own, selected)
				}
				podHook = podHook || h.Name == "mpod.kb.io"
			}
		}
	}
	if crds < 10 || hooks < 20 || !podHook {
		t.Errorf("%d CRDs, %d webhooks, pod webhook %v: the module's manifests were not all read", crds, hooks, podHook)
	}
	// The serving certificate verifies for 127.0.0.1 against the CA.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	blk, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("serving certificate: %v", err)
	}
}
