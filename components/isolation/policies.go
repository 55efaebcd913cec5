package isolation

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	networkingv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/networking/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// DefaultDenyName is the policy that selects every pod of the namespace and allows no
	// ingress: whatever no allow names is refused.
	DefaultDenyName = "default-deny-ingress"
	// policyComponent is the component label of every NetworkPolicy.
	policyComponent = "network-policy"
	// namespaceNameLabel is the label the API server sets on every namespace, its name.
	namespaceNameLabel = "kubernetes.io/metadata.name"
	// componentLabel is the pod label that tells Kolotoc's workloads apart.
	componentLabel = "app.kubernetes.io/component"
)

// Port is a TCP port, or the range Port..EndPort. A policy lists a range's ports one by one, never
// as endPort: Cilium before 1.16, which a GKE Dataplane V2 or AKS cluster may still run, ignores
// endPort and admits only the range's first port (https://docs.cilium.io/en/stable/network/kubernetes/policy/,
// "Known missing features"), so the Dask workers past each pod's first would be unreachable there.
// Keep ranges to what a workload listens on.
type Port struct {
	Port    int
	EndPort int // 0: just Port
}

// Peer is who may connect: pods of this stack (by component), possibly in another namespace,
// every pod of the namespace, address ranges, or anyone at all.
type Peer struct {
	Components []string // pods of these components of this stack
	Namespace  string   // the Components' namespace when it is not the policy's own
	AllPods    bool     // every pod of the policy's namespace
	CIDRs      []string // address ranges outside the cluster (a LoadBalancer's source ranges)
	// Anyone is every source, the cluster's nodes included: the rule lists no peer. Address
	// ranges cannot say it everywhere: "0.0.0.0/0" and "::/0" admit the nodes by the
	// specification, but Cilium never matches a node by an ipBlock, while it reads a rule without
	// peers as its wildcard selector, which matches every identity, host and remote-node
	// included (cilium/cilium pkg/k8s/network_policy.go; docs.cilium.io, Layer 3 Policies: "An
	// empty EndpointSelector allows all traffic"). The other peers of the allow add nothing.
	Anyone bool
}

// Allow is one concern: which pods it protects, on which ports (none: every port), and who may
// connect. Name is the NetworkPolicy's name; Why is kept as its description annotation.
type Allow struct {
	Name  string
	Pods  []string // components whose pods the policy selects
	Ports []Port
	From  []Peer
	Why   string
}

// Args are a namespace's NetworkPolicies.
type Args struct {
	Namespace pulumi.StringInput // the namespace the policies live in
	Allows    []Allow
	Labels    meta.Labels
	// DenyEgress are addresses no pod of the namespace may reach (policy DenyEgressName);
	// everything else stays open. None: no egress policy.
	DenyEgress []string
}

// DenyEgressName is the policy that keeps the namespace's pods from the addresses of
// Args.DenyEgress.
const DenyEgressName = "deny-metadata-egress"

// MetadataAddresses are the clouds' node metadata and workload-credential endpoints: the
// instance metadata service of GCE, EC2 and Azure (169.254.169.254, EC2's IPv6 fd00:ec2::254),
// GKE's metadata server under Dataplane V2 (169.254.169.252) and the EKS Pod Identity agent
// (169.254.170.23, fd00:ec2::23). A pod that reaches them gets the node's credentials (or,
// with Workload Identity / Pod Identity, a token for its service account).
var MetadataAddresses = []string{"169.254.169.252/32", "169.254.169.254/32", "169.254.170.23/32", "fd00:ec2::23/128", "fd00:ec2::254/128"}

// MetadataDNS is the one metadata address that is also a pod's resolver: on a GKE cluster whose
// DNS is Cloud DNS (Autopilot's, opt-in on Standard) the kubelet writes it into every pod's
// resolv.conf, and the node's metadata server answers DNS there on port 53
// (https://cloud.google.com/kubernetes-engine/docs/concepts/about-cloud-dns; seen dropped by a
// policy without this exception on Dataplane V2: tektoncd/operator#4000). The metadata deny admits
// it on port 53 alone, UDP and TCP; nothing hands out credentials on that port, on any cloud.
const MetadataDNS = "169.254.169.254/32"

// Policies are a namespace's default-deny and its allows.
type Policies struct {
	pulumi.ResourceState
	// Items are the NetworkPolicies: what pods wait for. Depend on them rather than on the
	// component, whose children the SDK records from their registration goroutines (a dependency
	// on the component taken at once may miss some, and a pod start before its deny policy).
	Items []pulumi.Resource
}

// NewPolicies registers the default-deny policy and one policy per allow.
func NewPolicies(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Policies, error) {
	if args == nil {
		return nil, errors.New("isolation: policy args are required")
	}
	seen := map[string]bool{DefaultDenyName: true, DenyEgressName: true}
	for _, a := range args.Allows {
		if seen[a.Name] || len(a.Pods) == 0 || len(a.From) == 0 {
			return nil, fmt.Errorf("isolation %q: allow %q is a duplicate, selects no pods or admits no one", name, a.Name)
		}
		seen[a.Name] = true
	}
	p := &Policies{}
	if err := ctx.RegisterComponentResource("kolotoc:isolation:NetworkPolicies", name, p, opts...); err != nil {
		return nil, fmt.Errorf("isolation %q: %w", name, err)
	}
	add := func(n string, a *networkingv1.NetworkPolicyArgs) error {
		np, err := networkingv1.NewNetworkPolicy(ctx, n, a, pulumi.Parent(p))
		if err != nil {
			return fmt.Errorf("NetworkPolicy %q: %w", n, err)
		}
		p.Items = append(p.Items, np)
		return nil
	}
	if err := add(name+"-"+DefaultDenyName, RenderDefaultDeny(args)); err != nil {
		return nil, fmt.Errorf("isolation %q: %w", name, err)
	}
	for _, a := range args.Allows {
		if err := add(name+"-"+a.Name, RenderAllow(args, a)); err != nil {
			return nil, fmt.Errorf("isolation %q: %w", name, err)
		}
	}
	if deny := RenderDenyEgress(args); deny != nil {
		if err := add(name+"-"+DenyEgressName, deny); err != nil {
			return nil, fmt.Errorf("isolation %q: %w", name, err)
		}
	}
	return p, meta.RegisterOutputs(ctx, p, pulumi.Map{})
}

// RenderDefaultDeny selects every pod and allows no ingress. Kubernetes still lets the kubelet
// reach the pods of its own node (probes, `kubectl port-forward`, `kubectl exec`).
func RenderDefaultDeny(a *Args) *networkingv1.NetworkPolicyArgs {
	md := a.Labels.ObjectMeta(DefaultDenyName, a.Namespace, policyComponent)
	md.Annotations = pulumi.StringMap{"kolotoc.dev/description": pulumi.String(
		"Refuse every connection to this namespace's pods that no other policy here allows.")}
	return &networkingv1.NetworkPolicyArgs{
		Metadata: md,
		Spec: &networkingv1.NetworkPolicySpecArgs{
			PodSelector: &metav1.LabelSelectorArgs{},
			PolicyTypes: pulumi.StringArray{pulumi.String("Ingress")},
		},
	}
}

// RenderDenyEgress is the egress policy of every pod of the namespace: any IPv4 address but those
// of DenyEgress, or nil when there are none. An egress policy selecting a pod denies what its
// rules do not allow, so the rules are "IPv4 anywhere except …" and every pod of every namespace by
// selector. By the specification the address range alone admits the pods too; Cilium, the
// enforcer of GKE Dataplane V2 and AKS's Cilium dataplane, never matches a pod or a node by an
// ipBlock (CIDR rules are for "the remote peer [that] is not an endpoint": docs.cilium.io, Layer 3
// Policies; AKS: "Network policies cannot use ipBlock to allow access to node or pod IPs"), so
// without the selector every pod would lose DNS and every in-cluster connection there.
// testbed/checks/flowcheck judges the recorded flows both ways.
//
// No "IPv6 anywhere except …" rule: on a cluster without IPv6 (every cluster Kolotoc makes),
// Cilium reads "::/0" as the whole world, IPv4 included, so that rule admitted the IPv4 metadata
// addresses the first one excepts: the policy denied nothing (seen on the test bed's real
// Cilium, tests/e2e TestForbiddenPathsRefusedForReal). IPv6 outside the cluster is refused
// instead, the IPv6 metadata addresses with it; in-cluster IPv6 stays open by the selector.
//
// When MetadataDNS is denied, a second rule admits DNS to it (port 53, UDP and TCP): without it,
// no pod resolves any name on a GKE cluster using Cloud DNS.
func RenderDenyEgress(a *Args) *networkingv1.NetworkPolicyArgs {
	if len(a.DenyEgress) == 0 {
		return nil
	}
	var v4, v6 []string
	for _, c := range a.DenyEgress {
		if strings.Contains(c, ":") {
			v6 = append(v6, c)
		} else {
			v4 = append(v4, c)
		}
	}
	sort.Strings(v4)
	sort.Strings(v6) // named in the description; denied with every other IPv6 address
	dnsNote := ""
	if slices.Contains(v4, MetadataDNS) {
		dnsNote = " (its DNS port on " + MetadataDNS + " stays open: GKE's Cloud DNS answers pods there)"
	}
	md := a.Labels.ObjectMeta(DenyEgressName, a.Namespace, policyComponent)
	md.Annotations = pulumi.StringMap{"kolotoc.dev/description": pulumi.String(
		"No pod of this namespace reaches the clouds' node metadata endpoints (" + strings.Join(append(append([]string{}, v4...), v6...), ", ") +
			"): they hand out the node's credentials" + dnsNote + ". Every other IPv4 destination stays open, every pod of the cluster by selector too (Cilium matches no pod by address); IPv6 outside the cluster is closed (Cilium reads ::/0 as the whole world on an IPv4 cluster).")}
	rules := networkingv1.NetworkPolicyEgressRuleArray{networkingv1.NetworkPolicyEgressRuleArgs{
		To: networkingv1.NetworkPolicyPeerArray{
			networkingv1.NetworkPolicyPeerArgs{IpBlock: &networkingv1.IPBlockArgs{Cidr: pulumi.String("0.0.0.0/0"), Except: pulumi.ToStringArray(v4)}},
			// Every pod of the cluster, as Cilium can match it (above).
			networkingv1.NetworkPolicyPeerArgs{NamespaceSelector: &metav1.LabelSelectorArgs{}},
		},
	}}
	if slices.Contains(v4, MetadataDNS) {
		rules = append(rules, networkingv1.NetworkPolicyEgressRuleArgs{
			To: networkingv1.NetworkPolicyPeerArray{networkingv1.NetworkPolicyPeerArgs{IpBlock: &networkingv1.IPBlockArgs{Cidr: pulumi.String(MetadataDNS)}}},
			Ports: networkingv1.NetworkPolicyPortArray{
				networkingv1.NetworkPolicyPortArgs{Protocol: pulumi.String("UDP"), Port: pulumi.Int(53)},
				networkingv1.NetworkPolicyPortArgs{Protocol: pulumi.String("TCP"), Port: pulumi.Int(53)},
			},
		})
	}
	return &networkingv1.NetworkPolicyArgs{
		Metadata: md,
		Spec: &networkingv1.NetworkPolicySpecArgs{
			PodSelector: &metav1.LabelSelectorArgs{},
			PolicyTypes: pulumi.StringArray{pulumi.String("Egress")},
			Egress:      rules,
		},
	}
}

// RenderAllow builds one allow: its pods, its ports, its peers.
func RenderAllow(a *Args, allow Allow) *networkingv1.NetworkPolicyArgs {
	md := a.Labels.ObjectMeta(allow.Name, a.Namespace, policyComponent)
	if allow.Why != "" {
		md.Annotations = pulumi.StringMap{"kolotoc.dev/description": pulumi.String(allow.Why)}
	}
	var ports networkingv1.NetworkPolicyPortArray
	for _, p := range allow.Ports {
		for port := p.Port; port <= max(p.Port, p.EndPort); port++ { // one by one: Port
			ports = append(ports, networkingv1.NetworkPolicyPortArgs{Protocol: pulumi.String("TCP"), Port: pulumi.Int(port)})
		}
	}
	var from networkingv1.NetworkPolicyPeerArray
	for _, peer := range allow.From {
		from = append(from, renderPeers(a.Labels, peer)...)
	}
	rule := networkingv1.NetworkPolicyIngressRuleArgs{Ports: ports}
	if !slices.ContainsFunc(allow.From, func(p Peer) bool { return p.Anyone }) {
		rule.From = from // else no peer at all: every source (Peer.Anyone)
	}
	return &networkingv1.NetworkPolicyArgs{
		Metadata: md,
		Spec: &networkingv1.NetworkPolicySpecArgs{
			PodSelector: PodSelector(a.Labels, allow.Pods),
			PolicyTypes: pulumi.StringArray{pulumi.String("Ingress")},
			Ingress:     networkingv1.NetworkPolicyIngressRuleArray{rule},
		},
	}
}

func renderPeers(l meta.Labels, p Peer) []networkingv1.NetworkPolicyPeerInput {
	var out []networkingv1.NetworkPolicyPeerInput
	if p.AllPods {
		out = append(out, networkingv1.NetworkPolicyPeerArgs{PodSelector: &metav1.LabelSelectorArgs{}})
	}
	if len(p.Components) > 0 {
		peer := networkingv1.NetworkPolicyPeerArgs{PodSelector: PodSelector(l, p.Components)}
		if p.Namespace != "" {
			peer.NamespaceSelector = &metav1.LabelSelectorArgs{MatchLabels: pulumi.StringMap{namespaceNameLabel: pulumi.String(p.Namespace)}}
		}
		out = append(out, peer)
	}
	cidrs := append([]string(nil), p.CIDRs...)
	sort.Strings(cidrs)
	for _, c := range cidrs {
		out = append(out, networkingv1.NetworkPolicyPeerArgs{IpBlock: &networkingv1.IPBlockArgs{Cidr: pulumi.String(c)}})
	}
	return out
}

// PodSelector selects the pods of the given components of this stack: by the component's own
// selector labels for one, by the stack's labels and an In expression for several (sorted, so
// that the rendered policy never depends on the order the stack listed them in).
func PodSelector(l meta.Labels, components []string) *metav1.LabelSelectorArgs {
	if len(components) == 1 {
		return &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(l.Selector(components[0]))}
	}
	sorted := append([]string(nil), components...)
	sort.Strings(sorted)
	stack := l.Selector("")
	delete(stack, componentLabel)
	return &metav1.LabelSelectorArgs{
		MatchLabels: pulumi.ToStringMap(stack),
		MatchExpressions: metav1.LabelSelectorRequirementArray{metav1.LabelSelectorRequirementArgs{
			Key: pulumi.String(componentLabel), Operator: pulumi.String("In"), Values: pulumi.ToStringArray(sorted),
		}},
	}
}
