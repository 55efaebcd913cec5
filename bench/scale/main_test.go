package main

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestParseState: the floor gets every Kubernetes object in the state's order, with secrets in
// plain text and the provider's __ fields gone, and waits for what the provider waits for.
func TestParseState(t *testing.T) {
	export := `{"deployment": {"resources": [
	  {"type": "pulumi:pulumi:Stack", "custom": false},
	  {"type": "pulumi:providers:kubernetes", "custom": true, "inputs": {"kubeconfig": "x"}},
	  {"type": "kubernetes:core/v1:Namespace", "custom": true, "inputs": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}},
	  {"type": "kubernetes:kolotoc.dev/v1alpha1:SimulatedNodePool", "custom": true, "inputs": {"apiVersion": "kolotoc.dev/v1alpha1", "kind": "SimulatedNodePool",
	    "metadata": {"name": "c-gpu", "annotations": {"pulumi.com/waitFor": "condition=Ready"}}, "spec": {"nodes": 3}}},
	  {"type": "kolotoc:ring:Ring", "custom": false},
	  {"type": "kubernetes:core/v1:Secret", "custom": true, "inputs": {"apiVersion": "v1", "kind": "Secret", "__fieldManager": "pulumi-kubernetes-1",
	    "metadata": {"name": "s", "namespace": "ns"},
	    "stringData": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "plaintext": "{\"password\":\"hunter2\"}"}}},
	  {"type": "kubernetes:apps/v1:StatefulSet", "custom": true, "inputs": {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "tower", "namespace": "ns"}}},
	  {"type": "kubernetes:batch/v1:Job", "custom": true, "inputs": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "launcher", "namespace": "ns", "annotations": {"pulumi.com/skipAwait": "true"}}}},
	  {"type": "kubernetes:apps/v1:Deployment", "custom": true, "inputs": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "entrypoint", "namespace": "ns"}}}
	]}}`
	s, err := ParseState([]byte(export))
	if err != nil {
		t.Fatal(err)
	}
	if s.Resources != 9 || s.NodeResources != 1 || s.Nodes != 3 {
		t.Errorf("resources %d (%d for nodes) nodes %d, want 9 (1), 3: the pool stands for its spec.nodes", s.Resources, s.NodeResources, s.Nodes)
	}
	var kinds []string
	for _, o := range s.Objects {
		kinds = append(kinds, o["kind"].(string))
		for k := range o {
			if strings.HasPrefix(k, "__") {
				t.Errorf("%s keeps the provider's field %s", o["kind"], k)
			}
		}
	}
	if got := strings.Join(kinds, ","); got != "Namespace,SimulatedNodePool,Secret,StatefulSet,Job,Deployment" {
		t.Errorf("objects %s, want the state's order of the Kubernetes objects", got)
	}
	m, err := s.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m), "password: hunter2") || strings.Contains(string(m), "plaintext") {
		t.Errorf("the secret is not unwrapped:\n%s", m)
	}
	// The pool by its waitFor condition, as the provider waits for it.
	want := []Awaited{{"SimulatedNodePool", "", "c-gpu", "condition=Ready"}, {"StatefulSet", "ns", "tower", ""}, {"Deployment", "ns", "entrypoint", ""}}
	if len(s.Awaited) != len(want) {
		t.Fatalf("awaited %v, want %v (the skipAwait Job left out)", s.Awaited, want)
	}
	for i := range want {
		if s.Awaited[i] != want[i] {
			t.Errorf("awaited %v, want %v", s.Awaited, want)
		}
	}

	if _, err := ParseState([]byte(`{"deployment": {"resources": [{"type": "kubernetes:core/v1:Secret", "custom": true,
	  "inputs": {"kind": "Secret", "data": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}}}]}}`)); err == nil ||
		!strings.Contains(err.Error(), "--show-secrets") {
		t.Errorf("an encrypted secret: err %v, want one naming --show-secrets", err)
	}
}

// TestConfig: N ranks are N/8 towers of 8 GPUs on N/8 nodes of 8 GPUs.
func TestConfig(t *testing.T) {
	b, err := Config(4096, "/k")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config struct {
			Pools []struct {
				Name        string `yaml:"name"`
				Nodes       int    `yaml:"nodes"`
				GPUsPerNode int    `yaml:"gpusPerNode"`
			} `yaml:"kolotoc:nodePools"`
			Towers struct {
				Count        int `yaml:"count"`
				GPUsPerTower int `yaml:"gpusPerTower"`
			} `yaml:"kolotoc:towers"`
			Cloud string `yaml:"kolotoc:cloud"`
		} `yaml:"config"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Config
	if c.Cloud != "simulated" || len(c.Pools) != 2 || c.Pools[0].Nodes != 512 || c.Pools[0].GPUsPerNode != 8 ||
		c.Towers.Count != 512 || c.Towers.GPUsPerTower != 8 {
		t.Errorf("4096 ranks:\n%s", b)
	}
	for _, bad := range []string{"100", "0", "x", "128,7"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("-sizes %s accepted", bad)
		}
	}
}

// TestSummary: every run's ratio in order, and the medians of the ratio, up and floor.
func TestSummary(t *testing.T) {
	r := func(n int, up, floor float64) Result {
		return Result{Ranks: n, Up: time.Duration(up * float64(time.Second)), Floor: time.Duration(floor * float64(time.Second))}
	}
	var b strings.Builder
	Summary(&b, []Result{r(128, 3, 2), r(128, 4, 2), r(128, 2, 2), r(1024, 10, 10), r(1024, 12, 10)})
	want := "N=128, 3 runs: up/floor 1.50 2.00 1.00; median 1.50 (pulumi up 3.0 s, floor 2.0 s)\n" +
		"N=1024, 2 runs: up/floor 1.00 1.20; median 1.10 (pulumi up 11.0 s, floor 10.0 s)\n"
	if b.String() != want {
		t.Errorf("got\n%swant\n%s", b.String(), want)
	}
}
