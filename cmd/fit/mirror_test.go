package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"kolotoc/testbed/checks/stackfiles"
)

const cloudStack = `config:
  gcp:project: my-project
  kolotoc:cloud: gcp
  kolotoc:namespace: training
  kolotoc:jupyterPassword:
    secure: v1:abc:def
  kolotoc:cluster:
    name: prod-cluster
    region: us-central1
    context: prod
    protect: true
  kolotoc:nodePools:
    - name: gpu
      machineType: a2-highgpu-8g
      nodes: 8
      zones: [us-central1-a]
    - name: cpu
      machineType: n2-standard-32
      nodes: 2
      maxNodes: 4
  kolotoc:storage:
    type: filestore
    protect: true
    allowReplace: true
  kolotoc:entrypoint:
    serviceType: LoadBalancer
    sourceRanges: [203.0.113.0/24]
    tlsCertificate: |
      -----BEGIN CERTIFICATE-----
      MIIB
      -----END CERTIFICATE-----
`

func TestNewMirror(t *testing.T) {
	m, err := NewMirror("prod", []byte(cloudStack), "/abs/kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "fit-prod" {
		t.Errorf("name %q, want fit-prod", m.Name)
	}
	c := m.Config
	if c["kolotoc:cloud"] != "simulated" || c["kolotoc:fit"] != true {
		t.Errorf("cloud %v, fit %v; want simulated, true", c["kolotoc:cloud"], c["kolotoc:fit"])
	}
	for _, k := range []string{"gcp:project", "kolotoc:namespace", "kolotoc:jupyterPassword"} {
		if _, ok := c[k]; ok {
			t.Errorf("%s kept: %v", k, c[k])
		}
	}
	wantCluster := map[string]any{"name": "fit-prod", "region": "us-central1", "kubeconfig": "/abs/kubeconfig"}
	if got := c["kolotoc:cluster"]; !reflect.DeepEqual(got, wantCluster) {
		t.Errorf("cluster %v, want %v (no context, no protect)", got, wantCluster)
	}
	if st := c["kolotoc:storage"].(map[string]any); st["protect"] != nil || st["allowReplace"] != nil || st["type"] != "filestore" {
		t.Errorf("storage %v: want the type kept, protect and allowReplace gone", st)
	}
	if want := []PoolDecl{{Name: "gpu", Index: 0, Nodes: 8}, {Name: "cpu", Index: 1, Nodes: 2, MaxNodes: 4}}; !reflect.DeepEqual(m.Pools, want) {
		t.Errorf("pools %+v, want %+v", m.Pools, want)
	}
	// Throw-away secrets, a certificate that matches its throw-away key.
	for _, k := range []string{"kolotoc:jupyterPassword", "kolotoc:sshKeySeed", "kolotoc:grafanaPassword", "kolotoc:entrypointTLSKey"} {
		if len(m.Secrets[k]) < 64 {
			t.Errorf("secret %s: %d characters", k, len(m.Secrets[k]))
		}
	}
	cert := c["kolotoc:entrypoint"].(map[string]any)["tlsCertificate"].(string)
	if _, err := tls.X509KeyPair([]byte(cert), []byte(m.Secrets["kolotoc:entrypointTLSKey"])); err != nil {
		t.Errorf("throw-away certificate and key do not match: %v", err)
	}
	notes := strings.Join(m.Notes, "\n")
	for _, want := range []string{"cloud gcp → simulated", "left out (nothing of theirs runs locally): gcp:project", "tlsCertificate → a throw-away one"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	// The config file holds no secret.
	b, err := m.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range m.Secrets {
		if strings.Contains(string(b), v) {
			t.Errorf("config file holds %s", k)
		}
	}
	if strings.Contains(string(b), "secure") {
		t.Errorf("config file holds a secure value:\n%s", b)
	}
}

func TestMirrorRealPool(t *testing.T) {
	m, err := NewMirror("dev", []byte("config:\n  kolotoc:cloud: simulated\n  kolotoc:nodePools:\n    - name: node\n      real: true\n      cpus: 2\n      memory: 8Gi\n"), "/k")
	if err != nil {
		t.Fatal(err)
	}
	pool := m.Config["kolotoc:nodePools"].([]any)[0].(map[string]any)
	if pool["real"] != false || !m.Pools[0].Real {
		t.Errorf("real pool: config %v, decl %+v; want real: false in the mirror, remembered as real", pool, m.Pools[0])
	}
	if len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "pool node (real: the local real node) → simulated nodes") {
		t.Errorf("notes %q", m.Notes)
	}
}

func TestMirrorRefusesNonStackFiles(t *testing.T) {
	for _, src := range []string{"", "name: kolotoc\nruntime: go\n", "config: [1, 2"} {
		if _, err := NewMirror("x", []byte(src), "/k"); err == nil {
			t.Errorf("%q accepted", src)
		}
	}
}

func TestMirrorName(t *testing.T) {
	for in, want := range map[string]string{"prod": "fit-prod", "My_Stack.v2": "fit-my-stack-v2", "--": "fit-stack"} {
		if got := MirrorName(in); got != want {
			t.Errorf("MirrorName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMirrorEveryStackFile: every committed stack file mirrors, and its mirror keeps every
// workload key of the original.
func TestMirrorEveryStackFile(t *testing.T) {
	files, err := stackfiles.Committed("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("only %d stack files", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMirror(stackFileName.FindStringSubmatch(filepath.Base(f))[1], b, "/k")
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		var doc struct {
			Config map[string]any `yaml:"config"`
		}
		_ = yaml.Unmarshal(b, &doc)
		for _, k := range []string{"kolotoc:towers", "kolotoc:carriers", "kolotoc:sentinels", "kolotoc:etcd", "kolotoc:elastic", "kolotoc:tfcluster", "kolotoc:monitoring"} {
			if !reflect.DeepEqual(doc.Config[k], m.Config[k]) {
				t.Errorf("%s: %s changed: %v → %v", f, k, doc.Config[k], m.Config[k])
			}
		}
	}
}

// TestMirrorQueue: a queued stack's mirror queues through a ClusterQueue of its own on the local
// Kueue: the cluster's ClusterQueue and Kueue's install are not the mirror's.
func TestMirrorQueue(t *testing.T) {
	file := cloudStack + "  kolotoc:queue:\n    type: kueue\n    clusterQueue: team-gpus\n    quota: {gpus: 16}\n"
	m, err := NewMirror("prod", []byte(file), "/abs/kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	q := m.Config["kolotoc:queue"].(map[string]any)
	if q["clusterQueue"] != nil || q["type"] != "kueue" || q["quota"] == nil {
		t.Errorf("mirrored queue %v: want kueue with its quota, without the cluster's ClusterQueue", q)
	}
	if !strings.Contains(strings.Join(m.Notes, "\n"), "queue.clusterQueue team-gpus →") {
		t.Errorf("notes do not say what became of the ClusterQueue: %v", m.Notes)
	}
}

// TestMirrorFromZero: a pool at zero is mirrored as it is (a Karpenter NodePool, which the local
// cluster's Karpenter grows), remembered as such; a pool autoscaled above zero keeps its nodes, and
// the notes say both.
func TestMirrorFromZero(t *testing.T) {
	file := strings.Replace(cloudStack, "      nodes: 8\n", "      minNodes: 0\n      maxNodes: 4\n", 1)
	m, err := NewMirror("prod", []byte(file), "/k")
	if err != nil {
		t.Fatal(err)
	}
	if want := []PoolDecl{{Name: "gpu", Index: 0, Nodes: 0, MaxNodes: 4, FromZero: true}, {Name: "cpu", Index: 1, Nodes: 2, MaxNodes: 4}}; !reflect.DeepEqual(m.Pools, want) {
		t.Errorf("pools %+v, want %+v", m.Pools, want)
	}
	if z := m.FromZero(); len(z) != 1 || !z["gpu"] {
		t.Errorf("FromZero %v, want gpu", z)
	}
	pool := m.Config["kolotoc:nodePools"].([]any)[0].(map[string]any)
	if pool["minNodes"] != 0 || pool["maxNodes"] != 4 {
		t.Errorf("mirrored pool %v: want minNodes 0, maxNodes 4 kept", pool)
	}
	notes := strings.Join(m.Notes, "\n")
	for _, w := range []string{"pool gpu (minNodes 0) → a Karpenter NodePool at zero", "pool cpu (autoscaled 2..4) → the 2 node(s) it starts with, fixed"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
}
