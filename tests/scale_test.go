package tests

import (
	"slices"
	"strings"
	"testing"
)

// TestOnlyPodsWaitForSimulatedNodes: on the simulated cloud every workload that makes pods waits
// for the Nodes (pods need somewhere to run, and on destroy they must go before their nodes, or
// they linger until the pod garbage collector finds them), and the namespaces and their policies
// do not: they are created while the Nodes are. They used to wait for all of them, and with
// hundreds of Nodes the first workload started only after the last Node (bench/scale).
func TestOnlyPodsWaitForSimulatedNodes(t *testing.T) {
	rec := deploy(t, layoutRaw(t, 1)) // prod-simulated: 8 GPU nodes, 2 CPU nodes
	var nodes []string
	for _, n := range rec.ofType(tNode) {
		nodes = append(nodes, n.Name)
	}
	if len(nodes) < 10 {
		t.Fatalf("%d Nodes registered, want the 10 of prod-simulated", len(nodes))
	}
	// A child is registered once its parent component is, and a component once what it depends
	// on exists: a resource waits for its own dependencies and its ancestors'.
	components := map[string]registered{}
	for _, r := range rec.sorted() {
		if strings.HasPrefix(r.Type, "kolotoc:") {
			components[r.Name] = r
		}
	}
	waitsFor := func(r registered) []string {
		deps := slices.Clone(r.DependsOn)
		for p, ok := components[r.Parent]; ok; p, ok = components[p.Parent] {
			deps = append(deps, p.DependsOn...)
		}
		return deps
	}
	pods := map[string]bool{tDeployment: true, tStatefulSet: true, tDaemonSet: true, tJob: true}
	checked := 0
	for _, r := range rec.sorted() {
		if r.Type == tNode || r.Type == tProvider || !strings.HasPrefix(r.Type, "kubernetes:") {
			continue
		}
		deps := waitsFor(r)
		waits := 0
		for _, n := range nodes {
			if slices.Contains(deps, n) {
				waits++
			}
		}
		switch {
		case pods[r.Type]:
			checked++
			if waits != len(nodes) {
				t.Errorf("%s %s waits for %d of the %d Nodes: its pods may start before their node exists, and outlive it on destroy", r.Type, r.Name, waits, len(nodes))
			}
		case (r.Type == "kubernetes:core/v1:Namespace" || r.Type == "kubernetes:networking.k8s.io/v1:NetworkPolicy") && waits > 0:
			t.Errorf("%s %s waits for %d Nodes: it makes no pod, and every Node is a step of the deployment", r.Type, r.Name, waits)
		}
	}
	if checked < 5 {
		t.Errorf("only %d workloads checked", checked)
	}
}
