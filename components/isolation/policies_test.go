package isolation

import (
	"testing"

	networkingv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/networking/v1"

	"kolotoc/components/meta"
)

// TestAnyoneRendersNoPeer: an allow for anyone renders its rule without peers, which the
// specification and Cilium both read as every source, the cluster's nodes included; address
// ranges, even 0.0.0.0/0, Cilium never matches to a node (Peer.Anyone). Its ports still hold, and
// the other peers are dropped, since they could only narrow what a reader thinks it admits.
func TestAnyoneRendersNoPeer(t *testing.T) {
	a := &Args{Labels: meta.Labels{Instance: "t"}}
	for _, tc := range []struct {
		name      string
		from      []Peer
		wantPeers int
	}{
		{"anyone", []Peer{{Anyone: true}}, 0},
		{"anyone beside address ranges", []Peer{{CIDRs: []string{"0.0.0.0/0"}}, {Anyone: true}}, 0},
		{"address ranges", []Peer{{CIDRs: []string{"0.0.0.0/0", "::/0"}}}, 2},
	} {
		p := RenderAllow(a, Allow{Name: "nfs-server", Pods: []string{"nfs-server"}, Ports: []Port{{Port: 2049}}, From: tc.from})
		rule := p.Spec.(*networkingv1.NetworkPolicySpecArgs).Ingress.(networkingv1.NetworkPolicyIngressRuleArray)[0].(networkingv1.NetworkPolicyIngressRuleArgs)
		peers, _ := rule.From.(networkingv1.NetworkPolicyPeerArray)
		if len(peers) != tc.wantPeers || (tc.wantPeers == 0 && rule.From != nil) {
			t.Errorf("%s: %d peers (from %#v), want %d", tc.name, len(peers), rule.From, tc.wantPeers)
		}
		if ports, _ := rule.Ports.(networkingv1.NetworkPolicyPortArray); len(ports) != 1 {
			t.Errorf("%s: ports %v, want 2049 alone", tc.name, rule.Ports)
		}
	}
}
