package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// input: namespace "train" denies every ingress and lets component=launcher reach
// component=tower on 22; namespace "other" has no policy.
const input = `{
 "policies": [
  {"metadata": {"name": "deny", "namespace": "train"},
   "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}},
  {"metadata": {"name": "ssh", "namespace": "train"},
   "spec": {"podSelector": {"matchLabels": {"component": "tower"}}, "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": 22}],
                         "from": [{"podSelector": {"matchLabels": {"component": "launcher"}}}]}]}}
 ],
 "namespaces": {"train": {"kubernetes.io/metadata.name": "train"}, "other": {"kubernetes.io/metadata.name": "other"}},
 "flows": [
  {"from": {"namespace": "train", "labels": {"component": "launcher"}}, "to": {"namespace": "train", "labels": {"component": "tower"}}, "port": 22},
  {"from": {"namespace": "train", "labels": {"component": "launcher"}}, "to": {"namespace": "train", "labels": {"component": "tower"}}, "port": 23},
  {"from": {"namespace": "train", "labels": {"component": "carrier"}}, "to": {"namespace": "train", "labels": {"component": "tower"}}, "port": 22},
  {"from": {"namespace": "other", "labels": {"component": "launcher"}}, "to": {"namespace": "train", "labels": {"component": "tower"}}, "port": 22},
  {"from": {"ip": "10.0.0.9"}, "to": {"namespace": "train", "labels": {"component": "launcher"}}, "port": 8080},
  {"from": {"namespace": "train", "labels": {"component": "tower"}}, "to": {"namespace": "other", "labels": {"app": "x"}}, "port": 53, "protocol": "UDP"}
 ]
}`

func TestJudge(t *testing.T) {
	var out bytes.Buffer
	if err := run(strings.NewReader(input), &out); err != nil {
		t.Fatal(err)
	}
	var got []Verdict
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	none := []string{}
	want := []Verdict{
		{Allowed: true, AdmittedBy: []string{"train/ssh"}, DeniedBy: []string{"train/deny"}},
		{Allowed: false, AdmittedBy: none, DeniedBy: []string{"train/deny", "train/ssh"}},
		{Allowed: false, AdmittedBy: none, DeniedBy: []string{"train/deny", "train/ssh"}},
		// A pod selector without a namespace selector means the policy's own namespace.
		{Allowed: false, AdmittedBy: none, DeniedBy: []string{"train/deny", "train/ssh"}},
		{Allowed: false, AdmittedBy: none, DeniedBy: []string{"train/deny"}},
		{Allowed: true, AdmittedBy: none, DeniedBy: none},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("verdicts (-want +got):\n%s", d)
	}
}

func TestBadInput(t *testing.T) {
	for name, tc := range map[string]struct{ in, err string }{
		"unknown field":     {`{"flows": [], "extra": 1}`, "unknown field"},
		"unknown namespace": {`{"flows": [{"from": {"namespace": "x"}, "to": {"ip": "1.2.3.4"}, "port": 1}]}`, `namespace "x" has no labels`},
		"no port":           {`{"flows": [{"from": {"ip": "1.2.3.4"}, "to": {"ip": "1.2.3.5"}}]}`, "port 0 is not a port"},
		"bad protocol":      {`{"flows": [{"from": {"ip": "1.2.3.4"}, "to": {"ip": "1.2.3.5"}, "port": 1, "protocol": "ICMP"}]}`, `protocol "ICMP"`},
		"external, no ip":   {`{"flows": [{"from": {}, "to": {"ip": "1.2.3.5"}, "port": 1}]}`, "needs its ip"},
		"policy without ns": {`{"policies": [{"metadata": {"name": "p"}}]}`, `policy "p" has no namespace`},
	} {
		err := run(strings.NewReader(tc.in), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.err)
		}
	}
}
