// Command flowcheck judges TCP connections against Kubernetes NetworkPolicies with an independent,
// real policy engine: the matcher of github.com/mattfenwick/cyclonus, which implements the
// NetworkPolicy specification (it is what cyclonus's conformance runs compare CNI plugins to).
//
// The end-to-end suite records the connections its workloads really make on the local cluster's
// real node and asks flowcheck whether the stack's rendered policies admit each one, and whether
// the connections Kolotoc means to forbid are refused. flowcheck knows nothing of Kolotoc: it reads
// one JSON document on stdin and writes one verdict per flow on stdout.
//
//	{"mode":       "spec" | "cilium",
//	 "policies":   [<networking.k8s.io/v1 NetworkPolicy>, ...],
//	 "namespaces": {"<name>": {<namespace labels>}, ...},
//	 "flows":      [{"from": <endpoint>, "to": <endpoint>, "port": 22, "protocol": "TCP"}, ...]}
//
// An endpoint is {"namespace": "...", "labels": {...}, "ip": "...", "node": false}: a pod when
// namespace is set, an address outside the cluster's pods otherwise; "node": true says that
// address is one of the cluster's nodes (a host-network pod is its node's address).
//
// Mode "spec" (the default) judges by the NetworkPolicy specification alone. Mode "cilium" applies
// on top what Cilium, the enforcer of GKE Dataplane V2 and AKS's Cilium dataplane, documents doing
// otherwise: an ipBlock never matches an endpoint of the cluster. Cilium's CIDR rules are "used to
// describe the relationship to or from external services if the remote peer is not an endpoint"
// (docs.cilium.io, Security, Network Policy, Layer 3 Policies, "IP/CIDR based"); a node's address
// is the host or remote-node entity, not a CIDR match (cilium/cilium#16308, #9209); AKS: "Network
// policies cannot use ipBlock to allow access to node or pod IPs" (AKS, Network policy best
// practices, Cilium limitations). So under "cilium" an ipBlock peer of an ingress rule never
// matches a source that is a pod or a node, nor one of an egress rule such a destination. A rule
// that lists no peer keeps the specification's reading, every source or destination, nodes
// included: Cilium translates it into its wildcard endpoint selector, which matches every
// identity, host and remote-node among them (cilium/cilium pkg/k8s/network_policy.go,
// ParseNetworkPolicy; docs.cilium.io, Layer 3 Policies: "An empty EndpointSelector allows all
// traffic"). The verdicts are
//
//	[{"allowed": true, "admittedBy": ["ns/policy", ...], "deniedBy": [...]}, ...]
//
// where admittedBy names each policy that, on its own, admits the flow (ingress at the
// destination or egress at the source) and deniedBy each policy that selects an end of the flow
// without admitting it. A flow no policy selects is allowed with both lists empty.
//
// It is its own module so that cyclonus's dependencies (an older golang.org/x/exp among them)
// stay out of Kolotoc's.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Input is what flowcheck reads.
type Input struct {
	Mode       string                       `json:"mode,omitempty"` // spec (default) | cilium
	Policies   []networkingv1.NetworkPolicy `json:"policies"`
	Namespaces map[string]map[string]string `json:"namespaces"`
	Flows      []Flow                       `json:"flows"`
}

// Endpoint is one end of a flow: a pod (Namespace set) or an address outside the pods.
type Endpoint struct {
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	IP        string            `json:"ip,omitempty"`
	Node      bool              `json:"node,omitempty"` // the address is a node's (Namespace empty)
}

// inCluster reports whether Cilium gives the endpoint an identity of the cluster (a pod, a node):
// then no CIDR rule selects it.
func (e Endpoint) inCluster() bool { return e.Namespace != "" || e.Node }

// Flow is one connection: from, to, the destination port (after any Service translation).
type Flow struct {
	From     Endpoint `json:"from"`
	To       Endpoint `json:"to"`
	Port     int      `json:"port"`
	Protocol string   `json:"protocol,omitempty"` // default TCP
}

// Verdict is the engine's answer for one flow.
type Verdict struct {
	Allowed    bool     `json:"allowed"`
	AdmittedBy []string `json:"admittedBy"`
	DeniedBy   []string `json:"deniedBy"`
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: flowcheck <input.json >verdicts.json (see the package documentation)")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flowcheck:", err)
		os.Exit(1)
	}
}

func run(r io.Reader, w io.Writer) error {
	var in Input
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("reading the input: %w", err)
	}
	verdicts, err := Judge(in)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(verdicts)
}

// engines are the policies as one engine (the verdict) and one engine each (which admit or refuse
// a flow), as an enforcer applies them to a flow.
type engines struct {
	all    *matcher.Policy
	single []*matcher.Policy
}

// blind says which ipBlocks the enforcer cannot match for a flow: those of ingress rules (the
// source is in the cluster) and those of egress rules (the destination is).
type blind struct{ ingress, egress bool }

// neverMatches is the peer an ipBlock becomes where the enforcer cannot match it: pods with a
// label no pod has, in namespaces with a label no namespace has. (Removing the peer instead would
// leave a rule with no peers, which the specification reads as "everyone".)
func neverMatches() networkingv1.NetworkPolicyPeer {
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"flowcheck.kolotoc.dev/cidr-cannot-match-cluster-endpoints": "true"}}
	return networkingv1.NetworkPolicyPeer{PodSelector: never, NamespaceSelector: never}
}

// blinded is p with the ipBlocks b says the enforcer cannot match replaced by neverMatches.
func blinded(p *networkingv1.NetworkPolicy, b blind) *networkingv1.NetworkPolicy {
	if !b.ingress && !b.egress {
		return p
	}
	q := p.DeepCopy()
	swap := func(peers []networkingv1.NetworkPolicyPeer) {
		for i := range peers {
			if peers[i].IPBlock != nil {
				peers[i] = neverMatches()
			}
		}
	}
	if b.ingress {
		for i := range q.Spec.Ingress {
			swap(q.Spec.Ingress[i].From)
		}
	}
	if b.egress {
		for i := range q.Spec.Egress {
			swap(q.Spec.Egress[i].To)
		}
	}
	return q
}

// Judge evaluates every flow against every policy together (the verdict) and against each policy
// alone (which policies admit or refuse it), by the specification or as Cilium enforces it.
func Judge(in Input) ([]Verdict, error) {
	switch in.Mode {
	case "", "spec", "cilium":
	default:
		return nil, fmt.Errorf("mode %q: allowed: spec, cilium", in.Mode)
	}
	for i := range in.Policies {
		if in.Policies[i].Namespace == "" {
			return nil, fmt.Errorf("policy %q has no namespace", in.Policies[i].Name)
		}
	}
	built := map[blind]*engines{}
	enginesFor := func(b blind) *engines {
		if e, ok := built[b]; ok {
			return e
		}
		e := &engines{single: make([]*matcher.Policy, len(in.Policies))}
		all := make([]*networkingv1.NetworkPolicy, len(in.Policies))
		for i := range in.Policies {
			all[i] = blinded(&in.Policies[i], b)
			e.single[i] = matcher.BuildNetworkPolicies(false, []*networkingv1.NetworkPolicy{all[i]})
		}
		e.all = matcher.BuildNetworkPolicies(false, all)
		built[b] = e
		return e
	}

	out := make([]Verdict, 0, len(in.Flows))
	for i, f := range in.Flows {
		traffic, err := in.traffic(f)
		if err != nil {
			return nil, fmt.Errorf("flow %d: %w", i, err)
		}
		var b blind
		if in.Mode == "cilium" {
			b = blind{ingress: f.From.inCluster(), egress: f.To.inCluster()}
		}
		e := enginesFor(b)
		engine, single := e.all, e.single
		v := Verdict{Allowed: engine.IsTrafficAllowed(traffic).IsAllowed(), AdmittedBy: []string{}, DeniedBy: []string{}}
		for j, p := range single {
			r := p.IsTrafficAllowed(traffic)
			name := in.Policies[j].Namespace + "/" + in.Policies[j].Name
			switch {
			case len(r.Ingress.AllowingTargets) > 0 || len(r.Egress.AllowingTargets) > 0:
				v.AdmittedBy = append(v.AdmittedBy, name)
			case len(r.Ingress.DenyingTargets) > 0 || len(r.Egress.DenyingTargets) > 0:
				v.DeniedBy = append(v.DeniedBy, name)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

func (in Input) traffic(f Flow) (*matcher.Traffic, error) {
	if f.Port <= 0 || f.Port > 65535 {
		return nil, fmt.Errorf("port %d is not a port", f.Port)
	}
	proto := corev1.Protocol(f.Protocol)
	switch proto {
	case "":
		proto = corev1.ProtocolTCP
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
	default:
		return nil, fmt.Errorf("protocol %q is not TCP, UDP or SCTP", f.Protocol)
	}
	from, err := in.peer(f.From)
	if err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	to, err := in.peer(f.To)
	if err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	return &matcher.Traffic{Source: from, Destination: to, ResolvedPort: f.Port, Protocol: proto}, nil
}

func (in Input) peer(e Endpoint) (*matcher.TrafficPeer, error) {
	if e.Node && e.Namespace != "" {
		return nil, fmt.Errorf("a pod (namespace %q) marked node: a host-network pod is its node's address (no namespace)", e.Namespace)
	}
	if e.Namespace == "" {
		if e.IP == "" {
			return nil, fmt.Errorf("an endpoint outside the pods needs its ip")
		}
		return &matcher.TrafficPeer{IP: e.IP}, nil
	}
	nsLabels, ok := in.Namespaces[e.Namespace]
	if !ok {
		return nil, fmt.Errorf("namespace %q has no labels in the input (every namespace has at least kubernetes.io/metadata.name)", e.Namespace)
	}
	return &matcher.TrafficPeer{IP: e.IP, Internal: &matcher.InternalPeer{
		Namespace: e.Namespace, NamespaceLabels: nsLabels, PodLabels: e.Labels,
	}}, nil
}
