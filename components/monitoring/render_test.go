package monitoring

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// testGrafanaPassword is kolotoc:grafanaPassword in these tests; it must reach the inputs only as
// a secret.
const testGrafanaPassword = "test-grafana-password-that-must-stay-secret"

// testArgs are the monitoring's Args as the stack builds them (stacks.MonitoringArgs) for the dev
// stack: on the CPU pool (the entrypoint's), with the GPU pools' agents namespace when the DCGM
// exporter runs. change applies to the section before its defaults are filled; gpuPools says
// whether the stack has a GPU pool.
func testArgs(gpuPools bool, change func(c *Config)) *Args {
	c := Config{Enabled: true, Pool: "cpu"} // the stack fills the pool from the entrypoint's
	if change != nil {
		change(&c)
	}
	pools := meta.Pools{{Name: "cpu", CPUs: 16}}
	if gpuPools {
		pools = append(pools, meta.Pool{Name: "gpu", GPUsPerNode: 4, CPUs: 32})
	}
	c.DefaultPools(pools)
	c.Default()
	a := &Args{Config: c, Site: rendertest.Site()}
	if a.GrafanaOn() {
		a.GrafanaPassword = pulumi.ToSecret(pulumi.String(testGrafanaPassword)).(pulumi.StringOutput)
	}
	if a.DCGMOn() { // stacks.Config.GPUAgentsNamespace
		a.AgentsNamespace, a.AgentsNamespaceDNS = pulumi.String("kolotoc-dev-gpu-agents"), "kolotoc-dev-gpu-agents"
	}
	return a
}

func render(t *testing.T, a *Args) *rendertest.Recorder {
	t.Helper()
	return rendertest.Render(t, "monitoring", a, New)
}

// TestRenderGolden snapshots Prometheus, Grafana and the DCGM exporter on a stack with GPUs; the
// Grafana password appears only as a secret.
func TestRenderGolden(t *testing.T) {
	got := rendertest.GoldenYAML(t, render(t, testArgs(true, nil)))
	rendertest.CompareGolden(t, filepath.Join("testdata", "monitoring.golden.yaml"), got)
	rendertest.NoSecretIn(t, got, testGrafanaPassword)
}

// TestRenderFacts checks what users rely on in the rendered monitoring.
func TestRenderFacts(t *testing.T) {
	names := func(rec *rendertest.Recorder, token string) []string {
		var out []string
		for _, r := range rec.OfType(token) {
			out = append(out, r.Name)
		}
		return out
	}
	off := func(c *Config) { f := false; c.Grafana = &f }
	noDCGM := func(c *Config) { f := false; c.DCGMExporter = &f }
	t.Run("the DCGM exporter only where it is on, in the agents' namespace; Grafana only when on", func(t *testing.T) {
		for _, tc := range []struct {
			name            string
			gpuPools        bool
			change          func(c *Config)
			wantDaemonSets  []string
			wantDeployments []string
		}{
			{"GPU pools", true, nil, []string{"monitoring-dcgm-exporter"}, []string{"monitoring-grafana", "monitoring-prometheus"}},
			{"no GPU pool", false, nil, nil, []string{"monitoring-grafana", "monitoring-prometheus"}},
			{"GPU pools, exporter off", true, noDCGM, nil, []string{"monitoring-grafana", "monitoring-prometheus"}},
			{"Grafana off", true, off, []string{"monitoring-dcgm-exporter"}, []string{"monitoring-prometheus"}},
		} {
			rec := render(t, testArgs(tc.gpuPools, tc.change))
			got := [][]string{names(rec, "kubernetes:apps/v1:DaemonSet"), names(rec, "kubernetes:apps/v1:Deployment")}
			if d := cmp.Diff([][]string{tc.wantDaemonSets, tc.wantDeployments}, got); d != "" {
				t.Errorf("%s: DaemonSets, Deployments (-want +got):\n%s", tc.name, d)
			}
			for _, ds := range rec.OfType("kubernetes:apps/v1:DaemonSet") {
				if ns := rendertest.Get(rendertest.Inputs(ds), "metadata", "namespace"); ns != "kolotoc-dev-gpu-agents" {
					t.Errorf("%s: the DCGM exporter runs in namespace %v, not the GPU agents' (whose Pod Security allows its host path)", tc.name, ns)
				}
			}
		}
	})
	t.Run("Grafana's password is a secret input, never plain text", func(t *testing.T) {
		rec := render(t, testArgs(true, nil))
		secret := rec.One(t, "kubernetes:core/v1:Secret", "monitoring-grafana")
		if d := cmp.Diff(rendertest.SecretMarker, rendertest.Get(rendertest.Inputs(secret), "stringData")); d != "" {
			t.Errorf("the Grafana Secret's stringData (-want +got):\n%s", d)
		}
		rendertest.NoSecretIn(t, rendertest.GoldenYAML(t, rec), testGrafanaPassword)
	})
	t.Run("Prometheus keeps the configured retention", func(t *testing.T) {
		rec := render(t, testArgs(false, func(c *Config) { c.Retention = "30d" }))
		args := rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:Deployment", "monitoring-prometheus")),
			"spec", "template", "spec", "containers", "[0]", "args")
		if d := cmp.Diff("--storage.tsdb.retention.time=30d", rendertest.Get(args, "[2]")); d != "" {
			t.Errorf("Prometheus's retention argument (-want +got):\n%s", d)
		}
	})
}
