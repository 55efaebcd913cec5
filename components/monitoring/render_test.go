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

// testArgs are the monitoring's Args as the stack builds them (stacks/workloads/monitoring.Args) for the dev
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

// TestDCGMPerNodeImage checks how the exporter reaches the driver on each GPU node image. It
// requests no GPU, so it sees only what the node gives a container that asks for none.
func TestDCGMPerNodeImage(t *testing.T) {
	container := func(t *testing.T, n GPUNodes) (any, any) {
		t.Helper()
		a := testArgs(true, nil)
		a.GPUNodes = n
		pod := rendertest.Get(rendertest.Inputs(render(t, a).One(t, "kubernetes:apps/v1:DaemonSet", "monitoring-dcgm-exporter")),
			"spec", "template", "spec")
		return rendertest.Get(pod, "containers", "[0]"), pod
	}
	env := func(c any) map[string]any {
		out := map[string]any{}
		list, _ := rendertest.Get(c, "env").([]any)
		for _, e := range list {
			out[rendertest.Get(e, "name").(string)] = rendertest.Get(e, "value")
		}
		return out
	}
	hostPaths := func(pod any) map[string]any {
		out := map[string]any{}
		list, _ := rendertest.Get(pod, "volumes").([]any)
		for _, v := range list {
			if p := rendertest.Get(v, "hostPath", "path"); p != nil {
				out[rendertest.Get(v, "name").(string)] = p
			}
		}
		return out
	}
	mountedAt := func(c any, volume string) any {
		list, _ := rendertest.Get(c, "volumeMounts").([]any)
		for _, m := range list {
			if rendertest.Get(m, "name") == volume {
				return rendertest.Get(m, "mountPath")
			}
		}
		return nil
	}

	// GKE: https://cloud.google.com/stackdriver/docs/managed-prometheus/exporters/nvidia-dcgm,
	// "Install the DCGM Exporter" (the manifest GoogleCloudPlatform/prometheus-engine
	// examples/nvidia-dcgm/exporter.yaml): hostPath /home/kubernetes/bin/nvidia mounted at
	// /usr/local/nvidia, LD_LIBRARY_PATH=/usr/local/nvidia/lib64, privileged: true,
	// DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE=device-name (GKE's device plugin names GPUs nvidia0, …).
	t.Run("GKE: the host's driver directory, privileged, GPUs by device name", func(t *testing.T) {
		c, pod := container(t, GPUNodes{DriverHostDir: "/home/kubernetes/bin/nvidia", DeviceIDs: DeviceIDsName})
		want := map[string]any{"pod-resources": "/var/lib/kubelet/pod-resources", "nvidia-driver": "/home/kubernetes/bin/nvidia"}
		if d := cmp.Diff(want, hostPaths(pod)); d != "" {
			t.Errorf("host paths (-want +got):\n%s", d)
		}
		if got := mountedAt(c, "nvidia-driver"); got != "/usr/local/nvidia" {
			t.Errorf("the driver is mounted at %v, not /usr/local/nvidia", got)
		}
		e := env(c)
		for k, v := range map[string]any{"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE": "device-name"} {
			if e[k] != v {
				t.Errorf("%s = %v, want %v", k, e[k], v)
			}
		}
		if _, ok := e["NVIDIA_VISIBLE_DEVICES"]; ok {
			t.Error("NVIDIA_VISIBLE_DEVICES set where no NVIDIA runtime reads it")
		}
		if rendertest.Get(c, "securityContext", "privileged") != true {
			t.Errorf("not privileged: the GPU devices stay closed to it: %v", rendertest.Get(c, "securityContext"))
		}
	})

	// EKS AL2023 NVIDIA AMI and AKS Ubuntu GPU nodes: the NVIDIA Container Toolkit is on the node
	// (https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html, "EKS-optimized
	// NVIDIA AMIs"; https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/microsoft-aks.html,
	// "Default AKS configuration without the GPU Operator": "AKS images include a preinstalled
	// NVIDIA GPU Driver and preinstalled NVIDIA Container Toolkit"). The toolkit injects the GPUs
	// NVIDIA_VISIBLE_DEVICES names (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html,
	// "GPU Enumeration"); NVIDIA's exporter manifest adds SYS_ADMIN, nothing else
	// (NVIDIA/dcgm-exporter dcgm-exporter.yaml).
	t.Run("NVIDIA Container Toolkit: every GPU asked of the runtime, no host driver, not privileged", func(t *testing.T) {
		c, pod := container(t, GPUNodes{})
		if d := cmp.Diff(map[string]any{"pod-resources": "/var/lib/kubelet/pod-resources"}, hostPaths(pod)); d != "" {
			t.Errorf("host paths (-want +got):\n%s", d)
		}
		e := env(c)
		for k, v := range map[string]any{"NVIDIA_VISIBLE_DEVICES": "all", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE": "uid"} {
			if e[k] != v {
				t.Errorf("%s = %v, want %v", k, e[k], v)
			}
		}
		if _, ok := e["LD_LIBRARY_PATH"]; ok {
			t.Error("LD_LIBRARY_PATH set: the runtime injects the driver's libraries")
		}
		sc := rendertest.Get(c, "securityContext")
		if rendertest.Get(sc, "privileged") == true {
			t.Error("privileged where the runtime injects the devices")
		}
		if d := cmp.Diff([]any{"SYS_ADMIN"}, rendertest.Get(sc, "capabilities", "add")); d != "" {
			t.Errorf("added capabilities (-want +got):\n%s", d)
		}
	})
}
