package entrypoint

import (
	"reflect"
	"testing"

	"kolotoc/components/meta/problemtest"
)

// report is what Validate reports of c, in its order.
func report(c Config) []string { return problemtest.Report(c.Validate) }

// TestConfigDefault: a section that says nothing but what the stack fills (the pool, the Dask
// image) gets Jupyter, TensorBoard and the Dask dashboard on, a ClusterIP Service, JupyterLab, the
// pinned images and the containers' requests; a second Default changes nothing, nor does it touch
// what the stack file says.
func TestConfigDefault(t *testing.T) {
	c := NewConfig()
	c.Pool, c.DaskImage = "cpu", "ghcr.io/dask/dask:2024.9.1" // the stack's
	c.Default()
	want := Config{
		Jupyter: true, TensorBoard: true, DaskDashboard: true, Pool: "cpu", DaskImage: "ghcr.io/dask/dask:2024.9.1",
		ServiceType: ServiceClusterIP, JupyterImage: DefaultJupyterImage, TensorBoardImage: DefaultTensorBoardImage, JupyterUI: UILab,
		SchedulerCPU: DefaultSchedulerCPU, SchedulerMemory: DefaultSchedulerMemory,
		JupyterCPU: DefaultJupyterCPU, JupyterMemory: DefaultJupyterMemory,
		TensorBoardCPU: DefaultTensorBoardCPU, TensorBoardMemory: DefaultTensorBoardMemory,
	}
	for _, after := range []string{"Default", "a second Default"} {
		if !reflect.DeepEqual(c, want) {
			t.Errorf("after %s:\n got %+v\nwant %+v", after, c, want)
		}
		c.Default() // fills zero values only: nothing is left to fill
	}

	set := Config{
		ServiceType: ServiceLoadBalancer, JupyterImage: "quay.io/jupyter/scipy-notebook:2024-09-01",
		TensorBoardImage: "tensorflow/tensorflow:2.16.1", JupyterUI: UINotebook,
		SchedulerCPU: "1", SchedulerMemory: "4Gi", JupyterCPU: "2", JupyterMemory: "8Gi",
		TensorBoardCPU: "500m", TensorBoardMemory: "1Gi",
	}
	kept := set
	kept.Default()
	if !reflect.DeepEqual(kept, set) {
		t.Errorf("Default overwrote what the stack file says: %+v became %+v", set, kept)
	}
	if kept.Pool != "" || kept.DaskImage != "" || kept.Jupyter || kept.TensorBoard || kept.DaskDashboard {
		t.Errorf("Default filled what the stack or the preset decides: %+v", kept)
	}
}

// TestConfigValidate: the defaulted section passes, as does a LoadBalancer with what it needs and
// the classic Notebook; an unknown Service type or front end is reported with its full key, the
// value and the allowed values; a LoadBalancer without source ranges, with Jupyter off or without
// a certificate is reported for each, in that order, and before the front end.
func TestConfigValidate(t *testing.T) {
	c := NewConfig()
	c.Default()
	if got := report(c); len(got) != 0 {
		t.Errorf("defaulted section reported %v", got)
	}

	const (
		noRanges = "entrypoint.sourceRanges=[]: required with a LoadBalancer: the CIDRs allowed in (e.g. your office's 203.0.113.0/24); " +
			"a LoadBalancer open to 0.0.0.0/0 puts JupyterLab on the internet"
		noJupyter = "entrypoint.serviceType=LoadBalancer: a LoadBalancer publishes Jupyter alone (over HTTPS), and entrypoint.jupyter is off; allowed: ClusterIP"
		noTLS     = "entrypoint.tlsCertificate=(unset): required with a LoadBalancer: Jupyter is published over HTTPS only; " +
			"set the PEM certificate here and its key with `pulumi config set --secret kolotoc:entrypointTLSKey < key.pem`"
	)
	published := func(c *Config) {
		c.ServiceType, c.SourceRanges, c.TLSCertificate = ServiceLoadBalancer, []string{"203.0.113.0/24"}, "[PEM]"
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"LoadBalancer with what it needs", published, nil},
		{"classic Notebook", func(c *Config) { c.JupyterUI = UINotebook }, nil},
		{"UIs off", func(c *Config) { c.Jupyter, c.TensorBoard, c.DaskDashboard = false, false, false }, nil},
		{"unknown Service type", func(c *Config) { c.ServiceType = "NodePort" },
			[]string{"entrypoint.serviceType=NodePort: allowed: ClusterIP, LoadBalancer"}},
		{"Service type left out", func(c *Config) { c.ServiceType = "" },
			[]string{"entrypoint.serviceType=(unset): allowed: ClusterIP, LoadBalancer"}},
		{"unknown front end", func(c *Config) { c.JupyterUI = "retro" },
			[]string{"entrypoint.jupyterUI=retro: allowed: lab, notebook"}},
		{"front end left out", func(c *Config) { c.JupyterUI = "" },
			[]string{"entrypoint.jupyterUI=(unset): allowed: lab, notebook"}},
		{"LoadBalancer without source ranges", func(c *Config) { published(c); c.SourceRanges = nil }, []string{noRanges}},
		{"LoadBalancer without Jupyter", func(c *Config) { published(c); c.Jupyter = false }, []string{noJupyter}},
		{"LoadBalancer without TLS", func(c *Config) { published(c); c.TLSCertificate = "" }, []string{noTLS}},
		{"bare LoadBalancer, Jupyter off, unknown front end", func(c *Config) {
			c.ServiceType, c.Jupyter, c.JupyterUI = ServiceLoadBalancer, false, "retro"
		}, []string{noRanges, noJupyter, noTLS, "entrypoint.jupyterUI=retro: allowed: lab, notebook"}},
		{"source ranges without a LoadBalancer", func(c *Config) { c.SourceRanges = []string{"203.0.113.0/24"} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c
			tc.edit(&bad)
			if got := report(bad); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
		})
	}
}
