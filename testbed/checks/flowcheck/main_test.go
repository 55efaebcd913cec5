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

// judge runs flowcheck on in and returns its verdicts.
func judge(t *testing.T, in string) []Verdict {
	t.Helper()
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	var got []Verdict
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestJudge(t *testing.T) {
	got := judge(t, input)
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
		"bad mode":          {`{"mode": "calico"}`, `mode "calico": allowed: spec, cilium`},
		"pod as node":       {`{"flows": [{"from": {"namespace": "x", "node": true}, "to": {"ip": "1.2.3.5"}, "port": 1}], "namespaces": {"x": {}}}`, "a host-network pod is its node"},
	} {
		err := run(strings.NewReader(tc.in), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.err)
		}
	}
}

// egressPolicy is a namespace-wide egress policy: every destination in ipBlock 0.0.0.0/0 but the
// clouds' metadata address, and, when pods is set, every pod of every namespace by selector too.
func egressPolicy(pods bool) string {
	peers := `{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}`
	if pods {
		peers += `, {"namespaceSelector": {}}`
	}
	return `{"metadata": {"name": "egress", "namespace": "train"},
	  "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [` + peers + `]}]}}`
}

// TestCiliumMode: the same policies, judged by the specification and as Cilium enforces them.
// Kolotoc's egress policy allowed "0.0.0.0/0 except the metadata addresses" only: by the
// specification that admits every pod and node; under Cilium (GKE Dataplane V2, AKS) an ipBlock
// matches no pod nor node, so every pod would have lost DNS and every in-cluster connection.
// Admitting pods by a namespace selector as well holds under both. A node stays unreachable by
// ipBlock under Cilium, and an ingress ipBlock never admits one.
func TestCiliumMode(t *testing.T) {
	flows := `[
	  {"from": {"namespace": "train", "labels": {"c": "tower"}, "ip": "10.8.0.5"}, "to": {"namespace": "train", "labels": {"c": "entrypoint"}, "ip": "10.8.0.6"}, "port": 8786},
	  {"from": {"namespace": "train", "labels": {"c": "tower"}, "ip": "10.8.0.5"}, "to": {"namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}, "ip": "10.8.1.2"}, "port": 53, "protocol": "UDP"},
	  {"from": {"namespace": "train", "labels": {"c": "tower"}, "ip": "10.8.0.5"}, "to": {"ip": "203.0.113.5"}, "port": 443},
	  {"from": {"namespace": "train", "labels": {"c": "tower"}, "ip": "10.8.0.5"}, "to": {"ip": "169.254.169.254"}, "port": 80},
	  {"from": {"namespace": "train", "labels": {"c": "tower"}, "ip": "10.8.0.5"}, "to": {"ip": "10.0.0.2", "node": true}, "port": 10250},
	  {"from": {"ip": "10.0.0.2", "node": true}, "to": {"namespace": "train", "labels": {"c": "nfs"}, "ip": "10.8.0.7"}, "port": 2049},
	  {"from": {"ip": "198.51.100.7"}, "to": {"namespace": "train", "labels": {"c": "nfs"}, "ip": "10.8.0.7"}, "port": 2049}
	]`
	nfs := `{"metadata": {"name": "nfs", "namespace": "train"},
	  "spec": {"podSelector": {"matchLabels": {"c": "nfs"}}, "policyTypes": ["Ingress"],
	           "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}}`
	allowedIn := func(mode string, pods bool) []bool {
		vs := judge(t, `{"mode": "`+mode+`", "policies": [`+egressPolicy(pods)+`, `+nfs+`],
		  "namespaces": {"train": {"kubernetes.io/metadata.name": "train"}, "kube-system": {"kubernetes.io/metadata.name": "kube-system"}},
		  "flows": `+flows+`}`)
		allowed := make([]bool, len(vs))
		for i, v := range vs {
			allowed[i] = v.Allowed
		}
		return allowed
	}
	//                  pod→pod, →DNS, →outside, →metadata, →node, node→nfs, outside→nfs
	spec := []bool{true, true, true, false, true, true, true}
	for _, tc := range []struct {
		mode string
		pods bool
		want []bool
	}{
		{"spec", false, spec},
		{"spec", true, spec},
		{"cilium", false, []bool{false, false, true, false, false, false, true}},
		{"cilium", true, []bool{true, true, true, false, false, false, true}},
	} {
		if d := cmp.Diff(tc.want, allowedIn(tc.mode, tc.pods)); d != "" {
			t.Errorf("mode %s, pods admitted by selector %v (-want +got):\n%s", tc.mode, tc.pods, d)
		}
	}
}

// TestCiliumNodesAndRulesWithoutPeers: a kubelet mounting the in-cluster NFS server connects from
// its node's address. By the specification an ipBlock 0.0.0.0/0 admits it; under Cilium no
// ipBlock matches a node, so the mount is refused. A rule that lists no peer admits it both ways:
// the specification reads it as every source, and Cilium translates it into its wildcard endpoint
// selector, "matching all endpoints that can be described with labels", the host and remote-node
// identities included (cilium/cilium pkg/k8s/network_policy.go, ParseNetworkPolicy; docs.cilium.io,
// Layer 3 Policies: "An empty EndpointSelector allows all traffic"). flowcheck changes only
// ipBlocks, so such a rule keeps the specification's verdict in mode cilium. The ports still hold.
func TestCiliumNodesAndRulesWithoutPeers(t *testing.T) {
	flows := `[
	  {"from": {"ip": "10.0.0.2", "node": true}, "to": {"namespace": "train", "labels": {"c": "nfs"}, "ip": "10.8.0.7"}, "port": 2049},
	  {"from": {"namespace": "train", "labels": {"c": "tower"}, "ip": "10.8.0.5"}, "to": {"namespace": "train", "labels": {"c": "nfs"}, "ip": "10.8.0.7"}, "port": 2049},
	  {"from": {"ip": "198.51.100.7"}, "to": {"namespace": "train", "labels": {"c": "nfs"}, "ip": "10.8.0.7"}, "port": 2049},
	  {"from": {"ip": "10.0.0.2", "node": true}, "to": {"namespace": "train", "labels": {"c": "nfs"}, "ip": "10.8.0.7"}, "port": 22}
	]`
	nfs := func(from string) string {
		return `{"metadata": {"name": "nfs", "namespace": "train"},
		  "spec": {"podSelector": {"matchLabels": {"c": "nfs"}}, "policyTypes": ["Ingress"],
		           "ingress": [{"ports": [{"protocol": "TCP", "port": 2049}]` + from + `}]}}`
	}
	deny := `{"metadata": {"name": "deny", "namespace": "train"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}`
	allowed := func(mode, policy string) []bool {
		vs := judge(t, `{"mode": "`+mode+`", "policies": [`+deny+`, `+policy+`],
		  "namespaces": {"train": {"kubernetes.io/metadata.name": "train"}}, "flows": `+flows+`}`)
		out := make([]bool, len(vs))
		for i, v := range vs {
			out[i] = v.Allowed
		}
		return out
	}
	anywhere := nfs(`, "from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]`)
	anyone := nfs("")
	//                                          node→nfs, pod→nfs, outside→nfs, node→nfs:22
	for _, tc := range []struct {
		name, mode, policy string
		want               []bool
	}{
		{"address ranges, specification", "spec", anywhere, []bool{true, true, true, false}},
		{"address ranges, Cilium", "cilium", anywhere, []bool{false, false, true, false}},
		{"no peer, specification", "spec", anyone, []bool{true, true, true, false}},
		{"no peer, Cilium", "cilium", anyone, []bool{true, true, true, false}},
	} {
		if d := cmp.Diff(tc.want, allowed(tc.mode, tc.policy)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}
