package etcd

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta/rendertest"
)

// testArgs are the store's Args as the stack builds them (stacks/workloads/etcd.Args) on the simulated
// cloud: members on the CPU pool, static volumes under the namespace's UID; change applies to the
// section before its defaults are filled.
func testArgs(change func(c *Config)) *Args {
	c := Config{Enabled: true, Members: 3}
	if change != nil {
		change(&c)
	}
	c.DefaultPools(rendertest.Pools())
	c.Default()
	a := &Args{Config: c, Site: rendertest.Site(), Name: Name, StaticVolumes: c.StorageClass == ""}
	if a.StaticVolumes {
		a.VolumeID = pulumi.String(rendertest.FakeNamespaceUID)
	}
	return a
}

func render(t *testing.T, a *Args) *rendertest.Recorder {
	t.Helper()
	return rendertest.Render(t, "etcd", a, New)
}

func TestRenderGolden(t *testing.T) {
	got := rendertest.GoldenYAML(t, render(t, testArgs(nil)))
	rendertest.CompareGolden(t, filepath.Join("testdata", "etcd.golden.yaml"), got)
}

// TestRenderFacts checks what users rely on in the rendered store.
func TestRenderFacts(t *testing.T) {
	t.Run("one static volume per member, under this life of the namespace, bound to its claim", func(t *testing.T) {
		rec := render(t, testArgs(nil))
		type volume struct {
			Name, Claim     string
			UnderVolumeID   bool
			IgnoresPathEdit bool
		}
		var got []volume
		for _, pv := range rec.OfType("kubernetes:core/v1:PersistentVolume") {
			in := rendertest.Inputs(pv)
			path, _ := rendertest.Get(in, "spec", "hostPath", "path").(string)
			claim, _ := rendertest.Get(in, "spec", "claimRef", "name").(string)
			got = append(got, volume{Name: pv.Name, Claim: claim,
				UnderVolumeID:   strings.HasPrefix(path, "/var/lib/kolotoc/kolotoc-dev/"+rendertest.FakeNamespaceUID+"/"),
				IgnoresPathEdit: cmp.Equal(pv.IgnoreChanges, []string{"spec.hostPath.path"})})
		}
		var want []volume
		for i := range 3 {
			want = append(want, volume{Name: fmt.Sprintf("etcd-data-%d", i), Claim: ClaimName("etcd", i), UnderVolumeID: true, IgnoresPathEdit: true})
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("static volumes (-want +got):\n%s", d)
		}
	})
	t.Run("a storage class provisions the claims: no static volume", func(t *testing.T) {
		rec := render(t, testArgs(func(c *Config) { c.StorageClass = "fast" }))
		if pvs := rec.OfType("kubernetes:core/v1:PersistentVolume"); len(pvs) != 0 {
			t.Errorf("%d static volumes registered beside a storage class", len(pvs))
		}
		sts := rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "etcd"))
		if d := cmp.Diff("fast", rendertest.Get(sts, "spec", "volumeClaimTemplates", "[0]", "spec", "storageClassName")); d != "" {
			t.Errorf("claim template's class (-want +got):\n%s", d)
		}
	})
	t.Run("members, their initial cluster, and a budget only for a quorum of three", func(t *testing.T) {
		for _, tc := range []struct {
			members         int
			wantInitial     int
			wantUnavailable any // nil: no PodDisruptionBudget
		}{{1, 1, nil}, {3, 3, float64(1)}} {
			rec := render(t, testArgs(func(c *Config) { c.Members = tc.members }))
			sts := rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "etcd"))
			var initial string
			for _, arg := range rendertest.Get(sts, "spec", "template", "spec", "containers", "[0]", "command").([]any) {
				if s := arg.(string); strings.HasPrefix(s, "--initial-cluster=") {
					initial = s
				}
			}
			var unavailable any
			for _, pdb := range rec.OfType("kubernetes:policy/v1:PodDisruptionBudget") {
				unavailable = rendertest.Get(rendertest.Inputs(pdb), "spec", "maxUnavailable")
			}
			got := []any{rendertest.Get(sts, "spec", "replicas"), strings.Count(initial, "=http://"), unavailable}
			if d := cmp.Diff([]any{float64(tc.members), tc.wantInitial, tc.wantUnavailable}, got); d != "" {
				t.Errorf("%d members: replicas, members in --initial-cluster, PDB maxUnavailable (-want +got):\n%s", tc.members, d)
			}
		}
	})
}
