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

func init() { Register(monitoringWorkload) } // in Config's order (workloads.go)

// The monitoring (kolotoc:monitoring): Prometheus, Grafana and the DCGM exporter
// (components/monitoring), on the entrypoint's pool unless said; the exporter runs in the GPU
// agents' namespace (security.go).
var monitoringWorkload = &Workload{
	Key:          monitoring.Key,
	Enabled:      func(c *Config) bool { return c.Monitoring.Enabled },
	PoolDefaults: func(c *Config, pools meta.Pools) { c.Monitoring.DefaultPools(pools) },
	Defaults: func(c *Config) {
		meta.Fill(&c.Monitoring.Pool, c.Entrypoint.Pool)
		c.Monitoring.Default() // components/monitoring/config.go
	},
	Check:   (*Config).validateMonitoring,
	Pools:   func(c *Config) []PoolUse { return []PoolUse{{c.Monitoring.Pool, "the monitoring"}} },
	Secrets: []string{monitoring.GrafanaSecretName},
	Deploy: func(ctx *pulumi.Context, c *Config, w *Wiring) error {
		a := MonitoringArgs(c)
		a.Site = w.Site.WithPodDeps(w.Pools...)
		if a.GrafanaOn() {
			a.GrafanaPassword = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal())).(pulumi.StringOutput)
		}
		a.AgentsNamespace = w.Agents
		_, err := monitoring.New(ctx, "monitoring", a, w.Opts...)
		return err
	},
	// Prometheus's UI (and Grafana's); its scrape of the Dask scheduler and worker processes.
	Allows: func(c *Config) []isolation.Allow {
		return monitoring.Allows(MonitoringArgs(c), append([]string{entrypoint.Component}, DaskWorkers(c)...), []isolation.Port{
			{Port: entrypoint.DashboardPort},
			{Port: dask.DashboardPortFirst, EndPort: dask.DashboardPortFirst + dask.MaxProcesses - 1},
		})
	},
	Outputs: func(c *Config, kube KubeAccess) pulumi.Map {
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
	a := &monitoring.Args{Config: c.Monitoring, Site: WorkloadSite(c), AgentsNamespaceDNS: c.GPUAgentsNamespace(), GPUNodes: c.GPUNodes()}
	if c.nodeGPUMetrics() != "" {
		a.NodeWatchers = []string{ring.TowerComponent} // the sentinels run in the towers' pods
	}
	return a
}

func (c *Config) validateMonitoring(v *Validator) {
	m := c.Monitoring
	if !m.Enabled {
		return
	}
	if pool := v.Pool(c, "monitoring.pool", m.Pool, false); pool != nil && pool.GPUsPerNode > 0 {
		v.add("monitoring.pool", m.Pool, fmt.Sprintf("is a GPU pool (tainted %s); Prometheus and Grafana need a CPU pool", GPUTaint))
	}
	v.Image("monitoring.prometheusImage", m.PrometheusImage)
	if m.DCGMOn() {
		v.Image("monitoring.dcgmImage", m.DCGMImage)
	}
	m.Validate(v) // the monitoring's own settings (components/monitoring/config.go)
	v.Quantity("monitoring.storageSize", m.StorageSize)
	if !m.GrafanaOn() {
		return // nor an image, nor a password
	}
	v.Image("monitoring.grafanaImage", m.GrafanaImage)
	v.Password("grafanaPassword", c.GrafanaPassword, "when monitoring is enabled with Grafana (its admin password; there is no default)")
}
