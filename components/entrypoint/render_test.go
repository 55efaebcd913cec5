package entrypoint

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"

	"kolotoc/components/dask"
	"kolotoc/components/meta/rendertest"
)

// The entrypoint's secrets in these tests (kolotoc:jupyterPassword, kolotoc:entrypointTLSKey):
// they must reach the inputs only as secrets.
const (
	testJupyterPassword = "test-jupyter-password-that-must-stay-secret"
	testTLSKey          = "-----BEGIN PRIVATE KEY-----\ntest-tls-key-that-must-stay-secret\n-----END PRIVATE KEY-----\n"
	testCertificate     = "-----BEGIN CERTIFICATE-----\ntest-certificate\n-----END CERTIFICATE-----\n"
)

// testArgs are the entrypoint's Args as the stack builds them (stacks/workloads/entrypoint.Args and
// deploy): the carriers' pool and Dask image, the secrets set; change applies to the section
// before its defaults are filled.
func testArgs(change func(c *Config)) *Args {
	c := NewConfig()
	c.Pool, c.DaskImage = "cpu", dask.DefaultImage // the stack fills both from the carriers'
	if change != nil {
		change(&c)
	}
	c.Default()
	a := &Args{Config: c, Site: rendertest.Site(), Name: Name}
	if c.Jupyter {
		a.JupyterPassword = pulumi.ToSecret(pulumi.String(testJupyterPassword)).(pulumi.StringOutput)
	}
	if c.TLSCertificate != "" {
		a.TLSKey = pulumi.ToSecret(pulumi.String(testTLSKey)).(pulumi.StringOutput)
	}
	return a
}

// public is a LoadBalancer publishing Jupyter over HTTPS to one range.
func public(c *Config) {
	c.ServiceType, c.SourceRanges, c.TLSCertificate = ServiceLoadBalancer, []string{"203.0.113.0/24"}, testCertificate
}

func render(t *testing.T, a *Args) *rendertest.Recorder {
	t.Helper()
	return rendertest.Render(t, "entrypoint", a, New)
}

// TestRenderGolden snapshots the entrypoint behind a ClusterIP (the default) and published by a
// LoadBalancer; neither the Jupyter password nor the TLS key is in the inputs in plain text.
func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *Config)
	}{{"clusterip", nil}, {"loadbalancer", public}} {
		t.Run(tc.name, func(t *testing.T) {
			got := rendertest.GoldenYAML(t, render(t, testArgs(tc.change)))
			rendertest.CompareGolden(t, filepath.Join("testdata", tc.name+".golden.yaml"), got)
			rendertest.NoSecretIn(t, got, testJupyterPassword, "test-tls-key-that-must-stay-secret")
		})
	}
}

// TestPublicServiceKeepsClientAddresses: the NetworkPolicy jupyter-public admits the source ranges
// only, so Jupyter's pod must see each client's own address. Every load balancer gets
// externalTrafficPolicy Local; on EKS the in-tree controller is also told nlb, or it makes a
// Classic ELB, which proxies TCP and hands the pod its own address ("Unlike Classic Elastic Load
// Balancers, Network Load Balancers (NLBs) forward the client's IP address through to the node":
// kubernetes.io, Service, Network Load Balancer support on AWS). GKE's passthrough load balancer
// and AKS's Standard Load Balancer keep the address with Local alone (GKE, LoadBalancer Service
// parameters; AKS, Use a public standard load balancer: "Maintain the client's IP on inbound
// connections") and get no annotation.
func TestPublicServiceKeepsClientAddresses(t *testing.T) {
	for _, tc := range []struct {
		lb             string
		wantAnnotation any // the aws-load-balancer-type annotation, nil: none
	}{
		{LoadBalancerPassthrough, nil},
		{LoadBalancerAWSInTree, "nlb"},
	} {
		t.Run("load balancer "+tc.lb, func(t *testing.T) {
			a := testArgs(public)
			a.LoadBalancer = tc.lb
			in := rendertest.Inputs(render(t, a).One(t, "kubernetes:core/v1:Service", "entrypoint-public"))
			got := []any{
				rendertest.Get(in, "spec", "externalTrafficPolicy"),
				rendertest.Get(in, "metadata", "annotations", AWSLoadBalancerTypeAnnotation),
			}
			if d := cmp.Diff([]any{"Local", tc.wantAnnotation}, got); d != "" {
				t.Errorf("externalTrafficPolicy, %s (-want +got):\n%s", AWSLoadBalancerTypeAnnotation, d)
			}
		})
	}
}

// TestRenderFacts checks what users rely on in the rendered entrypoint.
func TestRenderFacts(t *testing.T) {
	names := func(rec *rendertest.Recorder, token string) []string {
		var out []string
		for _, r := range rec.OfType(token) {
			out = append(out, r.Name)
		}
		return out
	}
	containers := func(rec *rendertest.Recorder) []string {
		var out []string
		cs, _ := rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:Deployment", "entrypoint")), "spec", "template", "spec", "containers").([]any)
		for _, c := range cs {
			out = append(out, rendertest.Get(c, "name").(string))
		}
		return out
	}
	t.Run("the Jupyter password and TLS key are secret inputs; Jupyter reads the token from its Secret", func(t *testing.T) {
		rec := render(t, testArgs(public))
		got := []any{
			rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:core/v1:Secret", "entrypoint-jupyter")), "stringData"),
			rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:core/v1:Secret", "entrypoint-tls")), "stringData"),
		}
		if d := cmp.Diff([]any{rendertest.SecretMarker, rendertest.SecretMarker}, got); d != "" {
			t.Errorf("the Secrets' stringData (-want +got):\n%s", d)
		}
		jupyter := rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:Deployment", "entrypoint")), "spec", "template", "spec", "containers", "[1]")
		wantToken := map[string]any{"name": "JUPYTER_TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "entrypoint-jupyter", "key": "token"}}}
		if d := cmp.Diff(wantToken, rendertest.Get(jupyter, "env", "[0]")); d != "" {
			t.Errorf("Jupyter's token (-want +got):\n%s", d)
		}
		rendertest.NoSecretIn(t, rendertest.GoldenYAML(t, rec), testJupyterPassword, "test-tls-key-that-must-stay-secret")
	})
	t.Run("what runs follows jupyter, tensorboard and daskDashboard", func(t *testing.T) {
		for _, tc := range []struct {
			name           string
			change         func(c *Config)
			wantContainers []string
			wantSecrets    []string
		}{
			{"defaults", nil, []string{"dask-scheduler", "jupyterlab", "tensorboard"}, []string{"entrypoint-jupyter"}},
			{"no Jupyter", func(c *Config) { c.Jupyter = false }, []string{"dask-scheduler", "tensorboard"}, nil},
			{"no TensorBoard", func(c *Config) { c.TensorBoard = false }, []string{"dask-scheduler", "jupyterlab"}, []string{"entrypoint-jupyter"}},
		} {
			rec := render(t, testArgs(tc.change))
			got := [][]string{containers(rec), names(rec, "kubernetes:core/v1:Secret")}
			if d := cmp.Diff([][]string{tc.wantContainers, tc.wantSecrets}, got); d != "" {
				t.Errorf("%s: containers, Secrets (-want +got):\n%s", tc.name, d)
			}
		}
	})
	t.Run("a LoadBalancer publishes Jupyter alone, over HTTPS, to the source ranges", func(t *testing.T) {
		if pubs := names(render(t, testArgs(nil)), "kubernetes:core/v1:Service"); !cmp.Equal(pubs, []string{"entrypoint"}) {
			t.Errorf("ClusterIP entrypoint: Services %v, want only entrypoint", pubs)
		}
		spec := rendertest.Get(rendertest.Inputs(render(t, testArgs(public)).One(t, "kubernetes:core/v1:Service", "entrypoint-public")), "spec")
		got := []any{rendertest.Get(spec, "type"), rendertest.Get(spec, "ports"), rendertest.Get(spec, "loadBalancerSourceRanges")}
		want := []any{"LoadBalancer",
			[]any{map[string]any{"name": "jupyter-https", "port": float64(PublicPort), "targetPort": float64(JupyterPort)}},
			[]any{"203.0.113.0/24"}}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("public Service's type, ports, source ranges (-want +got):\n%s", d)
		}
	})
}

// TestReadinessSoonAfterStart: `pulumi up` waits for the entrypoint's Deployment to be ready, and
// a container is ready only once a readiness probe passes. The kubelet probes a container once as
// it starts, and again when it reports the pod's status while the container runs unready
// (pkg/kubelet/prober/prober_manager.go, UpdatePodStatus: "Trigger an immediate run of the
// readinessProbe"); after that, once a period (worker.go, run: a ticker of periodSeconds). The
// first probes mostly come before the server listens, so the period bounds how long a started
// entrypoint stays unready: Kubernetes' default period, 10 s ("Configure Liveness, Readiness and
// Startup Probes": periodSeconds defaults to 10, failureThreshold to 3), made 4 of 10 measured
// `pulumi up`s of dev with the queue on 10 s longer (docs/measured.md). Every container's probe runs at
// most every 2 s, and still marks it unready only after 30 s of failures, as the defaults do.
func TestReadinessSoonAfterStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *Config)
	}{{"clusterip", nil}, {"loadbalancer", public}} {
		t.Run(tc.name, func(t *testing.T) {
			d := rendertest.Decode[appsv1.Deployment](t, render(t, testArgs(tc.change)).One(t, "kubernetes:apps/v1:Deployment", "entrypoint"))
			var names []string
			for _, c := range d.Spec.Template.Spec.Containers {
				names = append(names, c.Name)
				p := c.ReadinessProbe
				if p == nil {
					t.Errorf("container %s has no readiness probe: it is ready as soon as it starts, before it serves", c.Name)
					continue
				}
				if p.PeriodSeconds < 1 || p.PeriodSeconds > 2 {
					t.Errorf("container %s: readiness periodSeconds %d; want 1 or 2 (0 is Kubernetes' 10)", c.Name, p.PeriodSeconds)
				}
				if got := max(p.PeriodSeconds, 1) * max(p.FailureThreshold, 3); got < 30 {
					t.Errorf("container %s: unready after %d s of failed probes; want 30 s or more, as the defaults give", c.Name, got)
				}
			}
			if len(names) < 3 { // the scheduler, Jupyter and TensorBoard by default
				t.Errorf("containers %v: the probes of some were not checked", names)
			}
		})
	}
}
