package monitoring

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/components/ring"
	"kolotoc/stacks"
	"kolotoc/stacks/workloads/sentinels"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The monitoring (kolotoc:monitoring): Prometheus, Grafana and the DCGM exporter
// (components/monitoring), on the entrypoint's pool unless said; the exporter runs in the GPU
// agents' namespace (stacks/security.go).
var entry = &stacks.Workload{
	Key:          monitoring.Key,
	Enabled:      func(c *stacks.Config) bool { return c.Monitoring.Enabled },
	PoolDefaults: func(c *stacks.Config, pools meta.Pools) { c.Monitoring.DefaultPools(pools) },
	Defaults: func(c *stacks.Config) {
		meta.Fill(&c.Monitoring.Pool, c.Entrypoint.Pool)
		c.Monitoring.Default() // components/monitoring/config.go
	},
	Check: validateMonitoring,
	Pools: func(c *stacks.Config) []stacks.PoolUse {
		return []stacks.PoolUse{{Pool: c.Monitoring.Pool, Who: "the monitoring"}}
	},
	Secrets: []string{monitoring.GrafanaSecretName},
	Deploy: func(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
		a := Args(c)
		a.Site = w.Site.WithPodDeps(w.Pools...)
		if a.GrafanaOn() {
			a.GrafanaPassword = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal())).(pulumi.StringOutput)
		}
		a.AgentsNamespace = w.Agents
		_, err := monitoring.New(ctx, "monitoring", a, w.Opts...)
		return err
	},
	// Prometheus's UI (and Grafana's); its scrape of the Dask scheduler and worker processes.
	Allows: func(c *stacks.Config) []isolation.Allow {
		return monitoring.Allows(Args(c), append([]string{entrypoint.Component}, stacks.DaskWorkers(c)...), []isolation.Port{
			{Port: entrypoint.DashboardPort},
			dask.ProcessPorts(dask.DashboardPortFirst, stacks.DaskProcesses(c)),
		})
	},
	AgentsAllows: func(c *stacks.Config) []isolation.Allow {
		return monitoring.AgentsAllows(Args(c)) // dcgm-scrape, when the exporter runs
	},
	Outputs: func(c *stacks.Config, kube stacks.KubeAccess) pulumi.Map {
		out := monitoring.Outputs(Args(c), kube.Kubectlf)
		if c.Monitoring.GrafanaOn() { // the admin password is the stack's secret (kolotoc:grafanaPassword)
			out[stacks.GrafanaPasswordOutput] = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal()))
			out["grafanaPasswordCommand"] = pulumi.String(stacks.ShowSecretCommand(c, stacks.GrafanaPasswordOutput))
		}
		return out
	},
}

// Args is the monitoring's configuration, less its site's namespace input and PodDeps,
// the agents' namespace input and Grafana's password.
func Args(c *stacks.Config) *monitoring.Args {
	a := &monitoring.Args{Config: c.Monitoring, Site: stacks.WorkloadSite(c), AgentsNamespaceDNS: c.GPUAgentsNamespace(), GPUNodes: c.GPUNodes()}
	if sentinels.NodeGPUMetrics(c) != "" {
		a.NodeWatchers = []string{ring.TowerComponent} // the sentinels run in the towers' pods
	}
	return a
}

func validateMonitoring(c *stacks.Config, v *stacks.Validator) {
	m := c.Monitoring
	if !m.Enabled {
		return
	}
	if pool := v.Pool(c, "monitoring.pool", m.Pool, false); pool != nil && pool.GPUsPerNode > 0 {
		v.Add("monitoring.pool", m.Pool, fmt.Sprintf("is a GPU pool (tainted %s); Prometheus and Grafana need a CPU pool", stacks.GPUTaint))
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
