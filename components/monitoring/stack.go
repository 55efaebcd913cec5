package monitoring

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
)

// What the monitoring asks of the stack around it: the NetworkPolicy allows Prometheus and
// Grafana need, in the stack's namespace and in the GPU agents' (the DCGM exporter's), and the
// stack outputs that reach them. Which Dask pods run, and on which ports they serve metrics, the
// stack says; Grafana's admin password is the stack's secret (kolotoc:grafanaPassword), and so
// are its outputs.

// Allows are the NetworkPolicy allows of the monitoring in the stack's namespace: the namespace's
// pods reach Prometheus (and Grafana, when it runs); Prometheus reaches the metrics ports of the
// Dask pods it scrapes (its job JobDask), daskPods on daskPorts.
func Allows(a *Args, daskPods []string, daskPorts []isolation.Port) []isolation.Allow {
	ui := isolation.Allow{
		Name: "monitoring-ui", Pods: []string{PrometheusName}, Ports: []isolation.Port{{Port: PrometheusPort}},
		From: []isolation.Peer{{AllPods: true}}, Why: "Prometheus, from the namespace's pods and `kubectl port-forward`.",
	}
	if a.GrafanaOn() {
		ui.Pods = append(ui.Pods, GrafanaName)
		ui.Ports = append(ui.Ports, isolation.Port{Port: GrafanaPort})
		ui.Why = "Prometheus and Grafana, from the namespace's pods (Grafana queries Prometheus) and `kubectl port-forward`."
	}
	return []isolation.Allow{ui, {
		Name: "prometheus-scrape", Pods: daskPods, Ports: daskPorts,
		From: []isolation.Peer{{Components: []string{PrometheusName}}},
		Why:  "Prometheus scrapes the Dask scheduler's and every worker process's metrics.",
	}}
}

// AgentsAllows are the GPU agents' namespace's allows the monitoring needs: Prometheus, from the
// stack's namespace, scraping the DCGM exporter; none when the exporter does not run.
func AgentsAllows(a *Args) []isolation.Allow {
	if !a.DCGMOn() {
		return nil
	}
	allows := []isolation.Allow{{
		Name: "dcgm-scrape", Pods: []string{DCGMName}, Ports: []isolation.Port{{Port: DCGMPort}},
		From: []isolation.Peer{{Components: []string{PrometheusName}, Namespace: a.NamespaceDNS}},
		Why:  "Prometheus, in " + a.NamespaceDNS + ", scrapes the DCGM exporters.",
	}}
	if len(a.NodeWatchers) > 0 {
		allows = append(allows, isolation.Allow{
			Name: "dcgm-node-watch", Pods: []string{DCGMName}, Ports: []isolation.Port{{Port: DCGMPort}},
			From: []isolation.Peer{{Components: a.NodeWatchers, Namespace: a.NamespaceDNS}},
			Why:  "The sentinels beside the towers, in " + a.NamespaceDNS + ", read their own node's GPU metrics (sentinels.watchGPUs).",
		})
	}
	return allows
}

// Outputs are the monitoring's stack outputs: each endpoint's URL, port-forward and local URL,
// and with Grafana its GPU dashboard's local URL and admin user. Not the admin password: it is
// the stack's secret, and the stack outputs it as one. kubectl renders a kubectl command line for
// the stack's cluster.
func Outputs(a *Args, kubectl func(format string, a ...any) pulumi.StringOutput) pulumi.Map {
	out := pulumi.Map{}
	for name, ep := range Endpoints(a.NamespaceDNS, a.GrafanaOn()) {
		ep.Outputs(out, name, kubectl)
	}
	if a.GrafanaOn() {
		out["grafanaGpuDashboardLocalUrl"] = pulumi.String(fmt.Sprintf("http://localhost:%d/d/%s", GrafanaPort, DashboardUID))
		out["grafanaUser"] = pulumi.String(GrafanaAdminUser)
	}
	return out
}
