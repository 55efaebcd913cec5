// Command flowcheck judges TCP connections against Kubernetes NetworkPolicies with an independent,
// real policy engine: the matcher of github.com/mattfenwick/cyclonus, which implements the
// NetworkPolicy specification (it is what cyclonus's conformance runs compare CNI plugins to).
//
// The end-to-end suite records the connections its workloads really make on the local cluster's
// real node and asks flowcheck whether the stack's rendered policies admit each one, and whether
// the connections Kolotoc means to forbid are refused. flowcheck knows nothing of Kolotoc: it reads
// one JSON document on stdin and writes one verdict per flow on stdout.
//
//	{"policies":   [<networking.k8s.io/v1 NetworkPolicy>, ...],
//	 "namespaces": {"<name>": {<namespace labels>}, ...},
//	 "flows":      [{"from": <endpoint>, "to": <endpoint>, "port": 22, "protocol": "TCP"}, ...]}
//
// An endpoint is {"namespace": "...", "labels": {...}, "ip": "..."}: a pod when namespace is set,
// an address outside the cluster's pods otherwise. The verdicts are
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
)

// Input is what flowcheck reads.
type Input struct {
	Policies   []networkingv1.NetworkPolicy `json:"policies"`
	Namespaces map[string]map[string]string `json:"namespaces"`
	Flows      []Flow                       `json:"flows"`
}

// Endpoint is one end of a flow: a pod (Namespace set) or an address outside the pods.
type Endpoint struct {
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	IP        string            `json:"ip,omitempty"`
}

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

// Judge evaluates every flow against every policy together (the verdict) and against each policy
// alone (which policies admit or refuse it).
func Judge(in Input) ([]Verdict, error) {
	all := make([]*networkingv1.NetworkPolicy, len(in.Policies))
	single := make([]*matcher.Policy, len(in.Policies))
	for i := range in.Policies {
		p := &in.Policies[i]
		if p.Namespace == "" {
			return nil, fmt.Errorf("policy %q has no namespace", p.Name)
		}
		all[i] = p
		single[i] = matcher.BuildNetworkPolicies(false, []*networkingv1.NetworkPolicy{p})
	}
	engine := matcher.BuildNetworkPolicies(false, all)

	out := make([]Verdict, 0, len(in.Flows))
	for i, f := range in.Flows {
		traffic, err := in.traffic(f)
		if err != nil {
			return nil, fmt.Errorf("flow %d: %w", i, err)
		}
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
