// Command kueuelocal prepares Kueue (testbed/tools/kueue: the upstream module, pinned) for the
// local cluster: testbed/cluster/cluster.sh runs Kueue as a process inside the cluster's network
// namespace, like the control plane, with no Service in front of it. What a release's manifests do
// through a Service, a Deployment and cert-manager is done here for a process on the namespace's
// loopback:
//
//   - the CustomResourceDefinitions, taken unchanged from the module's config/components/crd/bases;
//
//   - the webhook configurations of config/components/webhook/manifests.yaml, each service
//     reference turned into a clientConfig.url on 127.0.0.1:PORT (the API server and Kueue share
//     the namespace's loopback) with the caBundle of a CA made here, and the selectors upstream's
//     kustomization adds; the webhooks of workload kinds (pods, Jobs, StatefulSets, …) also get an
//     objectSelector on the queue-name label, so that a pod of a stack without a queue never
//     waits on Kueue (the webhooks do nothing for such objects anyway: Kueue manages only what
//     names a queue, manageJobsWithoutQueueName being off);
//
//   - the serving certificate for 127.0.0.1, signed by that CA, in OUT/certs (tls.crt, tls.key),
//     and again under OUT/etc/kueue/metrics/certs for the metrics server (see run);
//
//   - Kueue's Configuration (OUT/config.yaml): webhook on 127.0.0.1:PORT, health and metrics on
//     the loopback, no internal cert management, no leader election (one process).
//
//     kueuelocal -module DIR -out DIR [-port 9443] [-health-port 8081] [-metrics-port 8443]
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Namespace is where Kueue keeps what it keeps in its own namespace (its Configuration's
// default, which upstream's webhook selectors exclude).
const Namespace = "kueue-system"

// QueueLabel is the label that puts an object in a LocalQueue (Kueue's constants.QueueLabel).
const QueueLabel = "kueue.x-k8s.io/queue-name"

// certValidity: the test bed's cluster lives for a day at most; a new cluster makes a new CA.
const certValidity = 30 * 24 * time.Hour

// excludedNamespaces are upstream's namespaceSelector for the pod, Deployment and StatefulSet
// webhooks (config/components/webhook/kustomization.yaml).
var excludedNamespaces = []any{"kube-system", Namespace}

// kueueOwnKinds are the webhooks on Kueue's own kinds: they apply to every object.
var kueueOwnGroups = map[string]bool{"kueue.x-k8s.io": true}

func main() {
	module := flag.String("module", "", "the sigs.k8s.io/kueue module's directory (go list -m -f {{.Dir}})")
	out := flag.String("out", "", "directory to write manifests.yaml, config.yaml and certs/ into")
	port := flag.Int("port", 9443, "webhook port on the namespace's loopback")
	health := flag.Int("health-port", 8081, "health probe port on the loopback")
	metrics := flag.Int("metrics-port", 8443, "metrics port on the loopback")
	flag.Parse()
	if *module == "" || *out == "" {
		log.Fatal("kueuelocal: -module and -out are required")
	}
	if err := run(*module, *out, *port, *health, *metrics); err != nil {
		log.Fatalf("kueuelocal: %v", err)
	}
}

func run(module, out string, port, health, metrics int) error {
	certDir := filepath.Join(out, "certs")
	// Kueue reads its metrics certificate from a fixed path, /etc/kueue/metrics/certs, when its
	// internal cert management is off (cmd/kueue/main.go): testbed/cluster/cluster.sh lays OUT/etc
	// over the host's /etc in Kueue's own mount namespace (a read-only overlay), so the host is
	// untouched.
	metricsDir := filepath.Join(out, "etc/kueue/metrics/certs")
	for _, d := range []string{certDir, metricsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	caPEM, certPEM, keyPEM, err := Certificates(time.Now())
	if err != nil {
		return err
	}
	manifests, err := Manifests(module, port, caPEM)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		filepath.Join(certDir, "tls.crt"):    certPEM,
		filepath.Join(certDir, "tls.key"):    keyPEM,
		filepath.Join(metricsDir, "tls.crt"): certPEM,
		filepath.Join(metricsDir, "tls.key"): keyPEM,
		filepath.Join(out, "ca.crt"):         caPEM,
		filepath.Join(out, "manifests.yaml"): manifests,
		filepath.Join(out, "config.yaml"):    Config(certDir, port, health, metrics),
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Config is Kueue's Configuration for one process on the namespace's loopback.
func Config(certDir string, port, health, metrics int) []byte {
	return []byte(fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - batch/job
  - pod
  - statefulset
`, Namespace, health, metrics, port, certDir))
}

// Manifests is the namespace, the CRDs and the webhook configurations, one YAML stream.
func Manifests(module string, port int, caPEM []byte) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", Namespace)
	crds, err := filepath.Glob(filepath.Join(module, "config/components/crd/bases/*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs under %s/config/components/crd/bases", module)
	}
	sort.Strings(crds)
	for _, f := range crds {
		c, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(bytes.TrimPrefix(c, []byte("---\n")))
	}
	hooks, err := os.ReadFile(filepath.Join(module, "config/components/webhook/manifests.yaml"))
	if err != nil {
		return nil, err
	}
	for _, doc := range strings.Split(string(hooks), "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("webhook manifests: %w", err)
		}
		if err := Rewire(obj, port, caPEM); err != nil {
			return nil, err
		}
		y, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

// Rewire points every webhook of a (Mutating|Validating)WebhookConfiguration at the loopback.
func Rewire(obj map[string]any, port int, caPEM []byte) error {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		return fmt.Errorf("webhook configuration without metadata")
	}
	// Upstream's kustomization prefixes every name with kueue-.
	md["name"] = "kueue-" + fmt.Sprint(md["name"])
	hooks, _ := obj["webhooks"].([]any)
	for _, h := range hooks {
		hook := h.(map[string]any)
		cc, _ := hook["clientConfig"].(map[string]any)
		svc, _ := cc["service"].(map[string]any)
		if svc == nil {
			return fmt.Errorf("webhook %v has no service reference", hook["name"])
		}
		hook["clientConfig"] = map[string]any{
			"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, svc["path"]),
			"caBundle": caPEM, // []byte marshals as base64, as caBundle is
		}
		own := false
		for _, r := range hook["rules"].([]any) {
			for _, g := range r.(map[string]any)["apiGroups"].([]any) {
				own = own || kueueOwnGroups[fmt.Sprint(g)]
			}
		}
		if own {
			continue
		}
		hook["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
			"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excludedNamespaces,
		}}}
		hook["objectSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
			"key": QueueLabel, "operator": "Exists",
		}}}
	}
	return nil
}

// Certificates makes a CA and a serving certificate for 127.0.0.1 signed by it (PEM).
func Certificates(now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kolotoc local kueue CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
