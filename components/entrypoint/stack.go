package entrypoint

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
)

// What the entrypoint asks of the stack around it: the NetworkPolicy allows its scheduler, its
// UIs and its published Jupyter need, and the stack outputs that reach them. Which Dask workers
// run the stack says; Jupyter's password is the stack's secret (kolotoc:jupyterPassword), and so
// are its outputs.

// SchedulerAllow lets the Dask workers (daskWorkers, by component) and Jupyter (in the
// entrypoint's own pod) reach the scheduler, and nothing outside the cluster: whoever reaches it
// runs code on every worker.
func SchedulerAllow(daskWorkers []string) isolation.Allow {
	return isolation.Allow{
		Name: "dask-scheduler", Pods: []string{Component},
		Ports: []isolation.Port{{Port: SchedulerPort}},
		From:  []isolation.Peer{{Components: append([]string{Component}, daskWorkers...)}},
		Why:   "Dask workers and Jupyter reach the scheduler (8786), and nothing else: it has no authentication.",
	}
}

// Allows are the entrypoint's UI allows: the namespace's pods reach the UIs that run (Jupyter,
// TensorBoard, the Dask dashboard); with a LoadBalancer, its source ranges reach Jupyter alone.
func Allows(a *Args) []isolation.Allow {
	var out []isolation.Allow
	var ui []isolation.Port
	if a.Jupyter {
		ui = append(ui, isolation.Port{Port: JupyterPort})
	}
	if a.TensorBoard {
		ui = append(ui, isolation.Port{Port: TensorBoardPort})
	}
	if a.DaskDashboard {
		ui = append(ui, isolation.Port{Port: DashboardPort})
	}
	if len(ui) > 0 {
		out = append(out, isolation.Allow{
			Name: "entrypoint-ui", Pods: []string{Component}, Ports: ui, From: []isolation.Peer{{AllPods: true}},
			Why: "JupyterLab, TensorBoard and the Dask dashboard: from the namespace's pods. " +
				"`kubectl port-forward` enters through the kubelet and needs no allow.",
		})
	}
	if a.ServiceType == ServiceLoadBalancer && len(a.SourceRanges) > 0 {
		out = append(out, isolation.Allow{
			Name: "jupyter-public", Pods: []string{Component}, Ports: []isolation.Port{{Port: JupyterPort}},
			From: []isolation.Peer{{CIDRs: a.SourceRanges}},
			Why:  "The LoadBalancer's source ranges reach Jupyter (HTTPS, password), the one published service.",
		})
	}
	return out
}

// Outputs are the entrypoint's stack outputs: each UI's URL, port-forward and local URL, the
// scheduler's address, a shell in the scheduler's container (the old `cluster.sh`'s exec into
// the scheduler node), and with a LoadBalancer the command that prints Jupyter's public URL. Not
// Jupyter's password: it is the stack's secret, and the stack outputs it as one. kubectl renders
// a kubectl command line for the stack's cluster.
func Outputs(a *Args, kubectl func(format string, a ...any) pulumi.StringOutput) pulumi.Map {
	out := pulumi.Map{
		"gotoEntrypoint": kubectl("-n %s exec -it deploy/%s -c %s -- bash", a.NamespaceDNS, a.Name, SchedulerContainer),
	}
	for name, ep := range Endpoints(a) {
		if name == "daskScheduler" {
			out["daskSchedulerAddress"] = pulumi.String(ep.URL)
			continue
		}
		ep.Outputs(out, name, kubectl)
	}
	if a.ServiceType == ServiceLoadBalancer {
		// The LoadBalancer's address is the cloud's to assign once the Service exists; the
		// command prints Jupyter's public URL from it as it is now (jupyterPublicUrl is the one
		// the last update saw).
		get := kubectl(`-n %s get svc %s -o jsonpath='{.status.loadBalancer.ingress[0].ip}{.status.loadBalancer.ingress[0].hostname}'`,
			a.NamespaceDNS, PublicName(a.Name))
		out["jupyterPublicUrlCommand"] = pulumi.Sprintf(`echo "https://$(%s)%s"`, get, JupyterPath(a))
	}
	return out
}
