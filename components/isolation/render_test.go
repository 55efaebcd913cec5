package isolation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	pcorev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

const npType = "kubernetes:networking.k8s.io/v1:NetworkPolicy"

var testLabels = meta.Labels{Instance: "dev", Version: "test"}

// testArgs: the towers' sshd from the launcher, Dask's scheduler from two components of the
// stack in another namespace, a port range (listed port by port), an NFS server from address ranges, Jupyter from
// anyone; and the metadata endpoints denied.
func testArgs() *Args {
	return &Args{
		Namespace: pulumi.String("kolotoc-dev"), Labels: testLabels,
		DenyEgress: []string{"169.254.169.254/32", "fd00:ec2::254/128", "169.254.170.23/32"},
		Allows: []Allow{
			{Name: "tower-ssh", Pods: []string{"tower"}, Ports: []Port{{Port: 2222}}, From: []Peer{{Components: []string{"launcher"}}}, Why: "the launcher starts ranks over ssh"},
			{Name: "dask-scheduler", Pods: []string{"dask-scheduler"}, Ports: []Port{{Port: 8786}, {Port: 30000, EndPort: 30003}},
				From: []Peer{{Components: []string{"monitoring", "dask-worker"}, Namespace: "kolotoc-dev-gpu-agents"}}},
			{Name: "nfs-server", Pods: []string{"nfs-server", "nfs-owner"}, Ports: []Port{{Port: 2049}}, From: []Peer{{CIDRs: []string{"10.1.0.0/16", "10.0.0.0/16"}}, {AllPods: true}}},
			{Name: "jupyter", Pods: []string{"entrypoint"}, Ports: []Port{{Port: 8888}}, From: []Peer{{Anyone: true}, {AllPods: true}}},
		},
	}
}

func policies(t *testing.T, a *Args) map[string]networkingv1.NetworkPolicy {
	t.Helper()
	rec := rendertest.Render(t, "network-policies", a, NewPolicies)
	out := map[string]networkingv1.NetworkPolicy{}
	for _, r := range rec.OfType(npType) {
		if r.Parent != "network-policies" {
			t.Errorf("%s: parent %q, want the component", r.Name, r.Parent)
		}
		out[strings.TrimPrefix(r.Name, "network-policies-")] = rendertest.Decode[networkingv1.NetworkPolicy](t, r)
	}
	return out
}

func tcp(port, end int) networkingv1.NetworkPolicyPort {
	p := networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(int32(port)))}
	if end > 0 {
		p.EndPort = ptr(int32(end))
	}
	return p
}

// inSelector selects the stack's pods of several components (PodSelector), listed sorted.
func inSelector(components ...string) *k8smeta.LabelSelector {
	return &k8smeta.LabelSelector{
		MatchLabels: map[string]string{"app.kubernetes.io/name": "kolotoc", "app.kubernetes.io/instance": "dev"},
		MatchExpressions: []k8smeta.LabelSelectorRequirement{{
			Key: "app.kubernetes.io/component", Operator: k8smeta.LabelSelectorOpIn, Values: components,
		}},
	}
}

func ptr[T any](v T) *T { return &v }

func selector(component string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "kolotoc", "app.kubernetes.io/instance": "dev", "app.kubernetes.io/component": component}
}

// TestPolicySet: one default-deny, one policy per allow, one egress deny; nothing else.
func TestPolicySet(t *testing.T) {
	got := policies(t, testArgs())
	var names []string
	for n := range got {
		names = append(names, n)
	}
	want := []string{"dask-scheduler", "default-deny-ingress", "deny-metadata-egress", "jupyter", "nfs-server", "tower-ssh"}
	if d := cmp.Diff(want, names, cmpSorted); d != "" {
		t.Errorf("policies (-want +got):\n%s", d)
	}
	deny := got["default-deny-ingress"]
	if len(deny.Spec.PodSelector.MatchLabels)+len(deny.Spec.PodSelector.MatchExpressions) != 0 || len(deny.Spec.Ingress) != 0 ||
		!cmp.Equal(deny.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress"}) {
		t.Errorf("default deny %+v: want every pod selected, ingress, no rule", deny.Spec)
	}
	if deny.Namespace != "kolotoc-dev" {
		t.Errorf("default deny in namespace %q", deny.Namespace)
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

// TestAllowRules: each allow selects its pods, admits its peers and opens its TCP ports only.
func TestAllowRules(t *testing.T) {
	got := policies(t, testArgs())
	for _, tc := range []struct {
		name  string
		pods  []string
		ports []networkingv1.NetworkPolicyPort
		from  []networkingv1.NetworkPolicyPeer
	}{
		{"tower-ssh", []string{"tower"}, []networkingv1.NetworkPolicyPort{tcp(2222, 0)},
			[]networkingv1.NetworkPolicyPeer{{PodSelector: &k8smeta.LabelSelector{MatchLabels: selector("launcher")}}}},
		{"dask-scheduler", []string{"dask-scheduler"}, []networkingv1.NetworkPolicyPort{tcp(8786, 0), tcp(30000, 0), tcp(30001, 0), tcp(30002, 0), tcp(30003, 0)}, // a range port by port: no endPort
			[]networkingv1.NetworkPolicyPeer{{
				PodSelector:       inSelector("dask-worker", "monitoring"),
				NamespaceSelector: &k8smeta.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kolotoc-dev-gpu-agents"}},
			}}},
		{"nfs-server", []string{"nfs-owner", "nfs-server"}, []networkingv1.NetworkPolicyPort{tcp(2049, 0)},
			[]networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16"}}, {IPBlock: &networkingv1.IPBlock{CIDR: "10.1.0.0/16"}},
				{PodSelector: &k8smeta.LabelSelector{}},
			}},
		// Anyone: no peer at all (Peer.Anyone), the port still holds.
		{"jupyter", []string{"entrypoint"}, []networkingv1.NetworkPolicyPort{tcp(8888, 0)}, nil},
	} {
		p, ok := got[tc.name]
		if !ok {
			t.Errorf("no policy %s", tc.name)
			continue
		}
		var wantSel *k8smeta.LabelSelector
		if len(tc.pods) == 1 {
			wantSel = &k8smeta.LabelSelector{MatchLabels: selector(tc.pods[0])}
		} else {
			wantSel = inSelector(tc.pods...)
		}
		if d := cmp.Diff(*wantSel, p.Spec.PodSelector); d != "" {
			t.Errorf("%s: pod selector (-want +got):\n%s", tc.name, d)
		}
		if len(p.Spec.Ingress) != 1 {
			t.Fatalf("%s: %d ingress rules, want 1", tc.name, len(p.Spec.Ingress))
		}
		rule := p.Spec.Ingress[0]
		if d := cmp.Diff(tc.ports, rule.Ports); d != "" {
			t.Errorf("%s: ports (-want +got):\n%s", tc.name, d)
		}
		if d := cmp.Diff(tc.from, rule.From); d != "" {
			t.Errorf("%s: peers (-want +got):\n%s", tc.name, d)
		}
		if len(p.Spec.Egress) != 0 || !cmp.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress"}) {
			t.Errorf("%s: policy types %v, egress %v: an allow must not touch egress", tc.name, p.Spec.PolicyTypes, p.Spec.Egress)
		}
	}
	if got["tower-ssh"].Annotations["kolotoc.dev/description"] != "the launcher starts ranks over ssh" {
		t.Errorf("tower-ssh description %q", got["tower-ssh"].Annotations["kolotoc.dev/description"])
	}
}

// TestDenyEgress: every IPv4 destination stays open but the metadata endpoints, and every pod of
// the cluster by selector (Cilium matches no pod by address); no IPv6 range, which Cilium reads as
// the whole world on an IPv4 cluster, the IPv4 metadata addresses included.
func TestDenyEgress(t *testing.T) {
	p := policies(t, testArgs())["deny-metadata-egress"]
	if !cmp.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{"Egress"}) || len(p.Spec.Ingress) != 0 {
		t.Errorf("policy types %v: want Egress alone", p.Spec.PolicyTypes)
	}
	udp := corev1.ProtocolUDP
	want := []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"169.254.169.254/32", "169.254.170.23/32"}}},
			{NamespaceSelector: &k8smeta.LabelSelector{}},
		}},
		// GKE's Cloud DNS resolver is the metadata address: its DNS port stays open, alone.
		{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "169.254.169.254/32"}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: ptr(intstr.FromInt32(53))}, tcp(53, 0)}},
	}
	if d := cmp.Diff(want, p.Spec.Egress); d != "" {
		t.Errorf("egress (-want +got):\n%s", d)
	}
	a0 := testArgs()
	a0.DenyEgress = []string{"169.254.170.23/32"}
	if rules := policies(t, a0)["deny-metadata-egress"].Spec.Egress; len(rules) != 1 {
		t.Errorf("%d egress rules without 169.254.169.254 denied, want the one: no DNS exception for an address not denied", len(rules))
	}
	a := testArgs()
	a.DenyEgress = nil
	if _, ok := policies(t, a)["deny-metadata-egress"]; ok {
		t.Error("an egress policy without addresses to deny")
	}
}

// TestRejectsBadAllows: a duplicate, an allow of no pods or of no one is refused before anything
// is registered.
func TestRejectsBadAllows(t *testing.T) {
	for _, bad := range []Allow{
		{Name: "tower-ssh", Pods: []string{"x"}, From: []Peer{{AllPods: true}}},
		{Name: "default-deny-ingress", Pods: []string{"x"}, From: []Peer{{AllPods: true}}},
		{Name: "empty", From: []Peer{{AllPods: true}}},
		{Name: "nobody", Pods: []string{"x"}},
	} {
		a := testArgs()
		a.Allows = append(a.Allows, bad)
		err := pulumi.RunErr(func(ctx *pulumi.Context) error {
			_, err := NewPolicies(ctx, "network-policies", a)
			return err
		}, pulumi.WithMocks(rendertest.Project, rendertest.Stack, &rendertest.Recorder{}))
		if err == nil || !strings.Contains(err.Error(), `allow "`+bad.Name+`"`) {
			t.Errorf("allow %+v: error %v, want it refused by name", bad, err)
		}
	}
}

// TestNamespaceLevel: the Namespace enforces the level it is given, audits and warns at
// restricted, and says why it is not baseline.
func TestNamespaceLevel(t *testing.T) {
	rec := rendertest.Run(t, func(ctx *pulumi.Context) error {
		_, err := pcorev1.NewNamespace(ctx, "ns", Render("kolotoc-dev", Level{Enforce: Privileged, Reasons: []string{"z: b", "a: c"}}, testLabels, "namespace"))
		return err
	})
	ns := rendertest.Decode[corev1.Namespace](t, rec.One(t, "kubernetes:core/v1:Namespace", "ns"))
	for k, v := range map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged", "pod-security.kubernetes.io/audit": "restricted",
		"pod-security.kubernetes.io/warn": "restricted", "app.kubernetes.io/instance": "dev",
	} {
		if ns.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, ns.Labels[k], v)
		}
	}
	if ns.Name != "kolotoc-dev" || ns.Annotations["kolotoc.dev/pod-security-reason"] != "a: c; z: b" {
		t.Errorf("namespace %q, reasons %q: want kolotoc-dev with the reasons sorted", ns.Name, ns.Annotations["kolotoc.dev/pod-security-reason"])
	}
}
