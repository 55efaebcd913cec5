package tests

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kolotoc/components/meta/rendertest"
	"kolotoc/stacks"
)

// awaitedKinds are the Kubernetes types the provider waits for (readiness on create and update,
// disappearance on delete).
var awaitedKinds = map[string]bool{
	tDeployment: true, tStatefulSet: true, tDaemonSet: true, tJob: true, tPod: true,
	tService: true, tPVC: true, tPV: true, "kubernetes:core/v1:Namespace": true,
	tPool: true, // by its Ready condition (pulumi.com/waitFor)
}

// TestAwaitTimeouts: every resource the Kubernetes provider awaits, in every layout, carries the
// stack's kolotoc:awaitTimeout as its create, update and delete timeouts (30m on clouds and
// existing clusters, 10m on the simulated cloud, or the configured value); nothing else does,
// nor the launcher, which is never awaited (pulumi.com/skipAwait). The launcher waits for its
// towers just as long.
func TestAwaitTimeouts(t *testing.T) {
	layouts := securityLayouts(t)
	layouts["existing"] = workloadsRaw(t, map[string]string{"cloud": "existing"})
	layouts["dev-45m"] = layoutRaw(t, 0)
	layouts["dev-45m"].Values["kolotoc:awaitTimeout"] = "45m"
	layouts["prod-1h30m"] = cloudRaw(t, "prod", map[string]string{"awaitTimeout": "1h30m"})
	wantTimeout := map[string]string{
		"dev": "10m", "prod-simulated": "10m", "workloads": "10m", "dev-options": "10m", "dev-baseline": "10m", "workloads-variant": "10m", "runs": "10m",
		"prod": "30m", "aws": "30m", "azure": "30m", "existing": "30m", "dev-45m": "45m", "prod-1h30m": "1h30m",
	}
	wantWait := map[string]string{"dev": "600", "prod": "1800", "existing": "1800", "dev-45m": "2700", "prod-1h30m": "5400"}

	seen := map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(layouts)) {
		raw := layouts[name]
		t.Run(name, func(t *testing.T) {
			want, ok := wantTimeout[name]
			if !ok {
				t.Fatalf("no expected timeout for layout %s", name)
			}
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AwaitTimeout != want {
				t.Errorf("kolotoc:awaitTimeout is %q, want %q", cfg.AwaitTimeout, want)
			}
			launchers := 0
			for _, r := range deploy(t, raw).sorted() {
				if len(r.Type) < 11 || r.Type[:11] != "kubernetes:" {
					continue
				}
				got := [3]string{r.CreateTimeout, r.UpdateTimeout, r.DeleteTimeout}
				md := rendertest.DecodeSome[metav1.PartialObjectMetadata](t, r)
				switch {
				case md.Annotations["pulumi.com/skipAwait"] == "true":
					if got != [3]string{} {
						t.Errorf("%s %s is never awaited but has timeouts %v", r.Type, r.Name, got)
					}
					if r.Type == tService {
						continue // in-cluster Services: TestInClusterServicesNotAwaited
					}
					if r.Type != tJob || r.Name != "towers-launcher" {
						t.Errorf("%s %s skips the readiness wait: only the launcher and in-cluster Services may", r.Type, r.Name)
						continue
					}
					launchers++
					if w, ok := wantWait[name]; ok {
						if env := envValues(templateOf(t, r).Spec.Containers[0]); env["KOLOTOC_WAIT_SECONDS"] != w {
							t.Errorf("launcher waits %s s for its towers, want %s", env["KOLOTOC_WAIT_SECONDS"], w)
						}
					}
				case awaitedKinds[r.Type]:
					seen[r.Type]++
					if got != [3]string{want, want, want} {
						t.Errorf("%s %s: timeouts create/update/delete %v, want %s each", r.Type, r.Name, got, want)
					}
				default:
					if got != [3]string{} {
						t.Errorf("%s %s is not awaited but has timeouts %v", r.Type, r.Name, got)
					}
				}
			}
			if cfg.Towers.Enabled && launchers != 1 {
				t.Errorf("%d launchers skip the wait, want 1", launchers)
			}
		})
	}
	// Every awaited kind Kolotoc registers was seen (it registers no bare Pods, and its one Job,
	// the launcher, is not awaited).
	for kind := range awaitedKinds {
		if kind != tPod && kind != tJob && seen[kind] == 0 {
			t.Errorf("no %s registered in any layout: the test does not cover it", kind)
		}
	}
}

// TestInClusterServicesNotAwaited: an in-cluster Service with a selector (ClusterIP, not
// headless) is not awaited, since the provider would call it ready only 10 s after its endpoints
// settle, at the end of every first deployment (bench/scale). In exchange its selector must match
// the pod labels of a workload the provider does await, in the same namespace: what the Service's
// await checked (that it targets pods) holds by construction. A LoadBalancer stays awaited (its
// address is an output), and headless Services are never awaited by the provider anyway.
func TestInClusterServicesNotAwaited(t *testing.T) {
	layouts := securityLayouts(t)
	sawLB := false
	for _, name := range slices.Sorted(maps.Keys(layouts)) {
		t.Run(name, func(t *testing.T) {
			rec := deploy(t, layouts[name])
			type pods struct {
				namespace string
				labels    map[string]string
			}
			var awaited []pods
			for _, typ := range []string{tDeployment, tStatefulSet} {
				for _, r := range rec.ofType(typ) {
					md := rendertest.DecodeSome[metav1.PartialObjectMetadata](t, r)
					if md.Annotations["pulumi.com/skipAwait"] == "true" {
						continue
					}
					awaited = append(awaited, pods{md.Namespace, templateOf(t, r).Labels})
				}
			}
			checked := 0
			for _, r := range rec.ofType(tService) {
				svc := decode[corev1.Service](t, r)
				skip := svc.Annotations["pulumi.com/skipAwait"] == "true"
				sel := svc.Spec.Selector
				switch {
				case svc.Spec.Type == corev1.ServiceTypeLoadBalancer:
					sawLB = true
					if skip {
						t.Errorf("LoadBalancer %s is not awaited: its address would be missing from the outputs", r.Name)
					}
					continue
				case svc.Spec.ClusterIP == corev1.ClusterIPNone || len(sel) == 0:
					continue
				}
				checked++
				if !skip {
					t.Errorf("Service %s is awaited: 10 s of endpoint settling at the end of every first deployment", r.Name)
				}
				ns := svc.Namespace
				matched := false
				for _, p := range awaited {
					if p.namespace != ns {
						continue
					}
					all := true
					for k, v := range sel {
						if p.labels[k] != v {
							all = false
						}
					}
					matched = matched || all
				}
				if !matched {
					t.Errorf("Service %s selects %v: no awaited Deployment or StatefulSet of namespace %s has those pod labels", r.Name, sel, ns)
				}
			}
			if checked == 0 {
				t.Errorf("no in-cluster Service with a selector registered: the test checks nothing")
			}
		})
	}
	if !sawLB {
		t.Errorf("no layout has a LoadBalancer: its half of the test checks nothing")
	}
}
