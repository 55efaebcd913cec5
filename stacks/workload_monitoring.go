package stacks

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/components/ring"
)

func init() { register(monitoringWorkload) } // in Config's order (workloads.go)

// The monitoring (kolotoc:monitoring): Prometheus, Grafana and the DCGM exporter
// (components/monitoring), on the entrypoint's pool unless said; the exporter runs in the GPU
// agents' namespace (security.go).
var monitoringWorkload = &workload{
	key:          monitoring.Key,
	enabled:      func(c *Config) bool { return c.Monitoring.Enabled },
	poolDefaults: func(c *Config, pools meta.Pools) { c.Monitoring.DefaultPools(pools) },
	defaults: func(c *Config) {
		meta.Fill(&c.Monitoring.Pool, c.Entrypoint.Pool)
		c.Monitoring.Default() // components/monitoring/config.go
	},
	check:   (*Config).validateMonitoring,
	pools:   func(c *Config) []poolUse { return []poolUse{{c.Monitoring.Pool, "the monitoring"}} },
	secrets: []string{monitoring.GrafanaSecretName},
	deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
		a := MonitoringArgs(c)
		a.Site = w.site.WithPodDeps(w.pools...)
		if a.GrafanaOn() {
			a.GrafanaPassword = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal())).(pulumi.StringOutput)
		}
		a.AgentsNamespace = w.agents
		_, err := monitoring.New(ctx, "monitoring", a, w.opts...)
		return err
	},
	// Prometheus's UI (and Grafana's); its scrape of the Dask scheduler and worker processes.
	allows: func(c *Config) []isolation.Allow {
		return monitoring.Allows(MonitoringArgs(c), append([]string{entrypoint.Component}, daskWorkers(c)...), []isolation.Port{
			{Port: entrypoint.DashboardPort},
			{Port: dask.DashboardPortFirst, EndPort: dask.DashboardPortFirst + dask.MaxProcesses - 1},
		})
	},
	outputs: func(c *Config, kube KubeAccess) pulumi.Map {
		out := monitoring.Outputs(MonitoringArgs(c), kube.Kubectlf)
		if c.Monitoring.GrafanaOn() { // the admin password is the stack's secret (kolotoc:grafanaPassword)
			out[GrafanaPasswordOutput] = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal()))
			out["grafanaPasswordCommand"] = pulumi.String(ShowSecretCommand(c, GrafanaPasswordOutput))
		}
		return out
	},
}

// MonitoringArgs is the monitoring's configuration, less its site's namespace input and PodDeps,
// the agents' namespace input and Grafana's password.
func MonitoringArgs(c *Config) *monitoring.Args {
	a := &monitoring.Args{Config: c.Monitoring, Site: workloadSite(c), AgentsNamespaceDNS: c.GPUAgentsNamespace(), GPUNodes: c.gpuNodes()}
	if c.nodeGPUMetrics() != "" {
		a.NodeWatchers = []string{ring.TowerComponent} // the sentinels run in the towers' pods
	}
	return a
}

func (c *Config) validateMonitoring(v *validator) {
	m := c.Monitoring
	if !m.Enabled {
		return
	}
	if pool := v.pool(c, "monitoring.pool", m.Pool, false); pool != nil && pool.GPUsPerNode > 0 {
		v.add("monitoring.pool", m.Pool, fmt.Sprintf("is a GPU pool (tainted %s); Prometheus and Grafana need a CPU pool", gpuTaint))
	}
	v.image("monitoring.prometheusImage", m.PrometheusImage)
	if m.DCGMOn() {
		v.image("monitoring.dcgmImage", m.DCGMImage)
	}
	m.Validate(v) // the monitoring's own settings (components/monitoring/config.go)
	v.quantity("monitoring.storageSize", m.StorageSize)
	if !m.GrafanaOn() {
		return // nor an image, nor a password
	}
	v.image("monitoring.grafanaImage", m.GrafanaImage)
	v.password("grafanaPassword", c.GrafanaPassword, "when monitoring is enabled with Grafana (its admin password; there is no default)")
}
