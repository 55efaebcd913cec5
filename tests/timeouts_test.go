package tests

import (
	"fmt"
	"sort"
	"testing"

	"kolotoc/stacks"
)

// awaitedKinds are the Kubernetes types the provider waits for (readiness on create and update,
// disappearance on delete).
var awaitedKinds = map[string]bool{
	tDeployment: true, tStatefulSet: true, tDaemonSet: true, tJob: true, tPod: true,
	tService: true, tPVC: true, tPV: true, "kubernetes:core/v1:Namespace": true,
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
	names := make([]string, 0, len(layouts))
	for name := range layouts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
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
				md := get(inputs(r), "metadata")
				switch {
				case get(md, "annotations", "pulumi.com/skipAwait") == "true":
					if got != [3]string{} {
						t.Errorf("%s %s is never awaited but has timeouts %v", r.Type, r.Name, got)
					}
					if r.Type == tService && r.Name == nfsServerService {
						continue // the volume waits for the server's Deployment instead
					}
					if r.Type != tJob || r.Name != "towers-launcher" {
						t.Errorf("%s %s skips the readiness wait: only the launcher and the NFS server's Service may", r.Type, r.Name)
						continue
					}
					launchers++
					if w, ok := wantWait[name]; ok {
						if env := containerEnv(get(inputs(r), "spec", "template", "spec", "containers", "[0]")); env["KOLOTOC_WAIT_SECONDS"] != w {
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

// containerEnv is a container's plain env values by name.
func containerEnv(container any) map[string]string {
	out := map[string]string{}
	env, _ := get(container, "env").([]any)
	for _, e := range env {
		if v, ok := get(e, "value").(string); ok {
			out[fmt.Sprint(get(e, "name"))] = v
		}
	}
	return out
}
