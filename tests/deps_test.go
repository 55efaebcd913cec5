package tests

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"kolotoc/components/meta/rendertest"
	"kolotoc/stacks"
)

// TestOnlyPodsWaitForSimulatedNodes: on the simulated cloud every workload that makes pods waits
// for every node pool its pods can be placed on (ready once all its nodes are: pods need
// somewhere to run, and on destroy they must go before their nodes, or they linger until the pod
// garbage collector finds them), and nothing else does: the namespaces, policies, Secrets,
// ConfigMaps, Services and volumes are created while the nodes are made. The policies used to
// wait for every Node, so with hundreds of Nodes they were created only after the last one, and
// the towers' Secrets and Services waited for the pools, then the StatefulSet for them
// (bench/scale). The in-cluster NFS server, which
// every pod that mounts the claim waits for, waits for its own pool alone: it used to wait for
// the GPU pools too, which put their nodes and the server one after the other on the way to
// every workload (bench/scale).
func TestOnlyPodsWaitForSimulatedNodes(t *testing.T) {
	for _, l := range []struct {
		name   string
		raw    func(t *testing.T) stacks.Raw
		nodes  int
		checks int // pod-making resources at least
	}{
		{"prod-simulated", func(t *testing.T) stacks.Raw { return layoutRaw(t, 1) }, 10, 5},
		// etcd, elastic, the TensorFlow cluster and monitoring: every optional workload.
		{"workloads", func(t *testing.T) stacks.Raw { return workloadsRaw(t, nil) }, 7, 10},
	} {
		t.Run(l.name, func(t *testing.T) { onlyPodsWaitForNodes(t, deploy(t, l.raw(t)), l.nodes, l.checks) })
	}
}

func onlyPodsWaitForNodes(t *testing.T, rec *recorder, nodes, checks int) {
	pools := map[string]map[string]string{} // pool resource → its nodes' labels
	for _, p := range rec.ofType(tPool) {
		pools[p.Name] = rendertest.DecodeSome[simulatedPool](t, p).Spec.Template.Metadata.Labels
	}
	if n := len(rec.simulatedNodes()); len(pools) != 2 || n != nodes {
		t.Fatalf("%d pools of %d nodes registered, want 2 pools of %d nodes", len(pools), n, nodes)
	}
	// placeable: the pools whose nodes a pod template's nodeSelector matches (all without one).
	placeable := func(r registered) []string {
		sel := templateOf(t, r).Spec.NodeSelector
		var out []string
		for name, labels := range pools {
			fits := true
			for k, v := range sel {
				fits = fits && labels[k] == v
			}
			if fits {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	waitsFor := waitsForFunc(rec)
	podMakers := map[string]bool{tDeployment: true, tStatefulSet: true, tDaemonSet: true, tJob: true}
	checked := 0
	for _, r := range rec.sorted() {
		if r.Type == tPool || r.Type == tProvider || !strings.HasPrefix(r.Type, "kubernetes:") {
			continue
		}
		deps := waitsFor(r)
		var waits []string
		for p := range pools {
			if slices.Contains(deps, p) {
				waits = append(waits, p)
			}
		}
		slices.Sort(waits)
		switch {
		case podMakers[r.Type]:
			checked++
			want := placeable(r)
			if len(want) == 0 {
				t.Errorf("%s %s: its pods fit no pool", r.Type, r.Name)
			}
			for _, p := range want {
				if !slices.Contains(waits, p) {
					t.Errorf("%s %s does not wait for node pool %s, where its pods may be placed: they may start before their node exists, and outlive it on destroy", r.Type, r.Name, p)
				}
			}
			if r.Name == "storage-server" && !slices.Equal(waits, want) {
				t.Errorf("the NFS server waits for node pools %v, want only its own %v: every pod that mounts the claim waits for it", waits, want)
			}
		case len(waits) > 0:
			// A Secret, ConfigMap, Service, volume or policy is made while the nodes are.
			t.Errorf("%s %s waits for node pools %v: it makes no pod, and need not wait for nodes", r.Type, r.Name, waits)
		}
	}
	if checked < checks {
		t.Errorf("only %d workloads checked, want %d at least", checked, checks)
	}
}

// waitsForFunc returns what a registered resource waits for: its own dependencies and its
// ancestors' (a child is registered once its parent component is, and a component once what it
// depends on exists).
func waitsForFunc(rec *recorder) func(registered) []string {
	components := map[string]registered{}
	for _, r := range rec.sorted() {
		if strings.HasPrefix(r.Type, "kolotoc:") {
			components[r.Name] = r
		}
	}
	return func(r registered) []string {
		deps := slices.Clone(r.DependsOn)
		for p, ok := components[r.Parent]; ok; p, ok = components[p.Parent] {
			deps = append(deps, p.DependsOn...)
		}
		return deps
	}
}

// waitsForURN: r, or a component above it, depends on a resource whose URN ends with suffix.
func waitsForURN(rec *recorder, r registered, suffix string) bool {
	components := map[string]registered{}
	for _, c := range rec.sorted() {
		if strings.HasPrefix(c.Type, "kolotoc:") {
			components[c.Name] = c
		}
	}
	for {
		for _, u := range r.DependsOnURNs {
			if strings.HasSuffix(u, suffix) {
				return true
			}
		}
		p, ok := components[r.Parent]
		if !ok {
			return false
		}
		r = p
	}
}

// claimURN ends the shared claim's URN.
const claimURN = "kubernetes:core/v1:PersistentVolumeClaim::storage"

// templateMountsClaim reports whether a workload's pod template mounts the shared claim.
func templateMountsClaim(t *testing.T, r registered) bool {
	t.Helper()
	return slices.ContainsFunc(templateOf(t, r).Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil })
}

// TestPodsWaitForEveryPolicy: every workload that makes pods waits for every NetworkPolicy of the
// stack (its default-deny and metadata-deny included) and every pull Secret, so that no pod runs
// a moment without them. The dependencies name the policies and Secrets themselves: a dependency
// on their component may miss children the SDK had not recorded yet (it records them from their
// registration goroutines), which made TestPullSecretOnEveryPod fail now and then.
func TestPodsWaitForEveryPolicy(t *testing.T) {
	for name, raw := range map[string]stacks.Raw{"prod-simulated": layoutRaw(t, 1), "workloads": workloadsRaw(t, nil)} {
		t.Run(name, func(t *testing.T) {
			rec := deploy(t, raw)
			waitsFor := waitsForFunc(rec)
			var policies []string
			for _, p := range rec.ofType("kubernetes:networking.k8s.io/v1:NetworkPolicy") {
				policies = append(policies, p.Name)
			}
			if len(policies) < 5 {
				t.Fatalf("%d NetworkPolicies registered", len(policies))
			}
			checked := 0
			for _, r := range rec.sorted() {
				switch r.Type {
				case tDeployment, tStatefulSet, tJob:
				case tDaemonSet: // the GPU agents: they mount nothing
				default:
					continue
				}
				if r.Name == "storage-server" {
					continue // by design (stacks/deploy.go): `destroy --exclude-protected` keeps the storage alone
				}
				checked++
				deps := waitsFor(r)
				for _, p := range policies {
					if !slices.Contains(deps, p) {
						t.Errorf("%s %s does not wait for NetworkPolicy %s", r.Type, r.Name, p)
					}
				}
				// The shared claim itself, for the pods that mount it, for the same reason (a
				// dependency on the storage component could miss its claim; the worst was a pod
				// Pending a moment).
				if templateMountsClaim(t, r) && !waitsForURN(rec, r, claimURN) {
					t.Errorf("%s %s mounts the shared claim and does not wait for it", r.Type, r.Name)
				}
			}
			if checked < 5 {
				t.Errorf("only %d workloads checked", checked)
			}
			// What makes no pod does not wait for the claim: the workloads' Secrets, ConfigMaps
			// and Services are made while the storage comes up, not after it (bench/scale: the
			// claim's dependents are on the critical path of every first deployment).
			others := 0
			for _, r := range rec.sorted() {
				switch r.Type {
				case tSecret, tConfigMap, tService:
				default:
					continue
				}
				if r.Parent == "storage" || r.Parent == "" {
					continue
				}
				others++
				if waitsForURN(rec, r, claimURN) {
					t.Errorf("%s %s (of %s) waits for the shared claim, which it does not use", r.Type, r.Name, r.Parent)
				}
			}
			if others < 3 {
				t.Errorf("only %d Secrets, ConfigMaps and Services of workloads checked", others)
			}
		})
	}
}

// TestNamespacesIndependent: the GPU agents' namespace does not depend on the stack's, so that
// `pulumi destroy` deletes both at once (the engine deletes in waves, and each namespace takes the
// namespace controller about 5 s: bench/scale's destroy took 10 s of namespaces in a row).
func TestNamespacesIndependent(t *testing.T) {
	rec := deploy(t, layoutRaw(t, 1))
	waitsFor := waitsForFunc(rec)
	main := "kolotoc-prod"
	agents := rec.one(t, "kubernetes:core/v1:Namespace", main+"-gpu-agents")
	if deps := waitsFor(agents); slices.Contains(deps, main) {
		t.Errorf("the GPU agents' namespace waits for %s (depends on %v)", main, deps)
	}
	// The main namespace's policies still wait for it.
	for _, p := range rec.ofType("kubernetes:networking.k8s.io/v1:NetworkPolicy") {
		if strings.HasPrefix(p.Name, "network-policies-") && !slices.Contains(waitsFor(p), main) {
			t.Errorf("NetworkPolicy %s does not wait for namespace %s", p.Name, main)
		}
	}
}

// TestPodsWaitForTheCloudsPoolsAndStore: on each cloud every pod-making workload waits for every
// node pool and for the file store's resources, named one by one. The stack used to depend on
// the cloud's components; the SDK expands such a dependency into the children the component
// has at that moment, and a child joins it from its own registration goroutine, so a workload
// registered just after could miss a pool (the pull Secrets and elastic's wait for etcd did).
// The stack now depends on every resource the components registered (meta.Tracker). With the
// race, this test failed only when the scheduler lost it.
func TestPodsWaitForTheCloudsPoolsAndStore(t *testing.T) {
	needs := map[string][]string{ // per cloud stack, the types every pod-maker must wait for
		"prod":  {tGKENodePool, tFilestore},
		"aws":   {tEKSNodeGroup, tMountTarget, tEKSAddon},
		"azure": {tAgentPool, tFileShare},
	}
	podMakers := map[string]bool{tDeployment: true, tStatefulSet: true, tDaemonSet: true, tJob: true}
	for _, s := range cloudStacks {
		t.Run(s.name, func(t *testing.T) {
			rec := deploy(t, cloudRaw(t, s.name, nil))
			var wanted []registered
			for _, typ := range needs[s.name] {
				of := rec.ofType(typ)
				if len(of) == 0 {
					t.Fatalf("no %s registered", typ)
				}
				wanted = append(wanted, of...)
			}
			checked := 0
			for _, r := range rec.sorted() {
				if !podMakers[r.Type] {
					continue
				}
				checked++
				for _, w := range wanted {
					if !waitsForURN(rec, r, w.Type+"::"+w.Name) {
						t.Errorf("%s %s does not wait for %s %s", r.Type, r.Name, w.Type, w.Name)
					}
				}
			}
			if checked < 3 {
				t.Errorf("only %d pod-making workloads checked", checked)
			}
		})
	}
}
