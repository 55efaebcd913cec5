package stacks

import (
	"fmt"
	"slices"
	"strings"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/ring"
	"kolotoc/components/storage"
)

// Least privilege: what the stack's namespaces enforce and who may connect to what. One place
// decides it from the config; the components render it (components/isolation).

// GPUAgentsSuffix names the namespace of the GPU node agents, <namespace>-gpu-agents: the NVIDIA
// device plugin and the DCGM exporter mount kubelet directories from the host and the exporter
// adds CAP_SYS_ADMIN, which Pod Security baseline forbids. Apart, they leave the stack's own
// namespace at baseline.
const GPUAgentsSuffix = "-gpu-agents"

// GPUAgentsNamespace is the GPU node agents' namespace; "" when the stack runs none.
func (c *Config) GPUAgentsNamespace() string {
	if (c.DevicePlugin.Enabled != nil && *c.DevicePlugin.Enabled) ||
		(c.Monitoring.Enabled && c.Monitoring.DCGMOn()) || c.EFAPools() {
		return c.Namespace + GPUAgentsSuffix
	}
	return ""
}

// usesScratch reports whether any workload mounts the per-pod scratch volume.
func (c *Config) usesScratch() bool {
	for _, wl := range c.enabledWorkloads() {
		if wl.Scratch {
			return true
		}
	}
	return false
}

// PodSecurity is the Pod Security level the stack's namespace enforces: baseline, unless an
// option needs more. Each such option is listed with why; docs/operating/security.md has the table.
func PodSecurity(c *Config) isolation.Level {
	var reasons []string
	if c.Towers.Enabled && c.Towers.HostNetwork {
		reasons = append(reasons, "towers.hostNetwork: the towers use the node's network namespace")
	}
	if c.InClusterNFS() {
		reasons = append(reasons, "storage.type "+storage.TypeInClusterNFS+": the in-cluster NFS server runs a privileged container (the kernel NFS server)")
	}
	if c.Storage.Scratch.Type == storage.ScratchHostPath && c.usesScratch() {
		reasons = append(reasons, "storage.scratch.type "+storage.ScratchHostPath+": every workload mounts a directory of its node")
	}
	if len(reasons) > 0 {
		if c.EFAPools() {
			reasons = append(reasons, "fabric: the EFA device plugin uses the node's network and mounts the kubelet's device-plugins directory and /dev/infiniband (hostPath)")
		}
		return isolation.Level{Enforce: isolation.Privileged, Reasons: reasons}
	}
	return isolation.Level{Enforce: isolation.Baseline}
}

// GPUAgentsPodSecurity is the GPU agents' namespace's level: privileged, for the agents it runs.
func GPUAgentsPodSecurity(c *Config) isolation.Level {
	var reasons []string
	if *c.DevicePlugin.Enabled {
		reasons = append(reasons, "devicePlugin: the NVIDIA device plugin mounts the kubelet's device-plugins directory (hostPath)")
	}
	if c.EFAPools() {
		reasons = append(reasons, "fabric: the EFA device plugin uses the node's network (hostNetwork) and mounts the kubelet's device-plugins directory and /dev/infiniband (hostPath), as upstream's chart runs it")
	}
	if c.Monitoring.Enabled && c.Monitoring.DCGMOn() {
		why := "monitoring.dcgmExporter: the DCGM exporter mounts the kubelet's pod-resources directory (hostPath) and adds CAP_SYS_ADMIN for profiling metrics"
		if dir := c.GPUNodes().DriverHostDir; dir != "" {
			why = "monitoring.dcgmExporter: the DCGM exporter mounts the kubelet's pod-resources directory and the node's driver (" + dir +
				", hostPath) and runs privileged to open the GPU devices, as GKE's own manifest does"
		}
		reasons = append(reasons, why)
	}
	return isolation.Level{Enforce: isolation.Privileged, Reasons: reasons}
}

// NetworkAllows are the stack namespace's ingress allows, one per concern, beside its
// default-deny. Only what a workload the config enables needs is allowed.
func NetworkAllows(c *Config) []isolation.Allow {
	var out []isolation.Allow
	add := func(a isolation.Allow) { out = append(out, a) }
	// Dask: the workers and Jupyter (in the entrypoint pod) reach the scheduler; the scheduler and
	// the workers reach each worker process and its nanny. Nothing outside the cluster reaches
	// the scheduler: whoever does runs code on every worker.
	workers := DaskWorkers(c)
	add(entrypoint.SchedulerAllow(workers))
	out = append(out, dask.Allows(entrypoint.Component, workers, DaskProcesses(c))...) // each worker process and nanny

	if c.InClusterNFS() {
		add(isolation.Allow{
			Name: "nfs-server", Pods: []string{storage.ServerName},
			Ports: []isolation.Port{{Port: storage.NFSPort}, {Port: storage.MountdPort}, {Port: storage.RPCBindPort}},
			// Anyone, not 0.0.0.0/0 and ::/0: under Cilium (GKE Dataplane V2, AKS; an existing
			// cluster may run either) no ipBlock matches a node, and every kubelet but the
			// server's own node's would be refused the mount (isolation.Peer.Anyone).
			From: []isolation.Peer{{Anyone: true}},
			Why: "The NFS ports from anyone: every node's kubelet mounts the share from the node's own address, " +
				"which no pod selector matches, Kolotoc cannot know, and Cilium matches by no address range; nothing else of the server is reachable.",
		})
	}
	// each workload's own (stacks/workloads/<key>)
	return append(out, workloadAllows(c, func(wl *Workload) func(*Config) []isolation.Allow { return wl.Allows })...)
}

// GPUAgentsNetworkAllows are the GPU agents' namespace's allows: only Prometheus, from the
// stack's namespace, scraping the DCGM exporter. The device plugin talks to the kubelet through
// a socket on the host and takes no connection.
func GPUAgentsNetworkAllows(c *Config) []isolation.Allow {
	return workloadAllows(c, func(wl *Workload) func(*Config) []isolation.Allow { return wl.AgentsAllows })
}

// DaskWorkers are the components whose pods run Dask workers: the carriers, and the towers
// when sentinels run beside them.
func DaskWorkers(c *Config) []string {
	out := []string{}
	if c.Carriers.Enabled {
		out = append(out, dask.CarrierComponent)
	}
	if c.Towers.Enabled && c.Sentinels.Enabled {
		out = append(out, ring.TowerComponent)
	}
	return out
}

// DaskProcesses is the most Dask worker processes one pod of the stack runs: a carrier's
// (carriers.workersPerCarrier), or a sentinel's one; 0 without Dask workers.
func DaskProcesses(c *Config) int {
	n := 0
	if c.Carriers.Enabled {
		n = c.Carriers.WorkersPerCarrier
	}
	if c.Towers.Enabled && c.Sentinels.Enabled {
		n = max(n, 1)
	}
	return n
}

// GPUShareCPULimit is the CPU limit of a pod holding gpus of a node's GPUs: the same share of
// the node's cores (a tower with all 8 GPUs may use every core; one with 4 of 8, half), never
// below its request. A limit at the request would throttle the input pipeline of a pod that owns
// the node; none at all would let co-located pods starve each other.
func GPUShareCPULimit(request string, p *NodePool, gpus int) string {
	if p == nil || p.GPUsPerNode < 1 || gpus < 1 {
		return request
	}
	share := max(p.CPUs*gpus/p.GPUsPerNode, 1)
	req, err := resource.ParseQuantity(request)
	if err != nil || req.MilliValue() >= int64(share)*1000 {
		return request
	}
	return fmt.Sprint(share)
}

// deployIsolation registers the stack namespace's NetworkPolicies and, when GPU node agents run,
// their namespace and its policies. It returns what the workloads wait for (so that no pod starts
// before its policies) and the agents' namespace name (nil without agents).
func deployIsolation(ctx *pulumi.Context, c *Config, ns pulumi.StringInput, labels meta.Labels,
	opts ...pulumi.ResourceOption) ([]pulumi.Resource, pulumi.StringInput, error) {
	var denyEgress []string
	if !c.Cluster.PodMetadataAccess {
		denyEgress = isolation.MetadataAddresses
	}
	p, err := isolation.NewPolicies(ctx, "network-policies", &isolation.Args{
		Namespace: ns, Allows: NetworkAllows(c), Labels: labels, DenyEgress: denyEgress,
	}, opts...)
	if err != nil {
		return nil, nil, err
	}
	deps := p.Items
	name := c.GPUAgentsNamespace()
	if name == "" {
		return deps, nil, nil
	}
	agentsNS, err := corev1.NewNamespace(ctx, name, isolation.Render(name, GPUAgentsPodSecurity(c), labels, "gpu-agents"), append(opts, pulumi.RetainOnDelete(c.AdoptNamespace))...)
	if err != nil {
		return nil, nil, err
	}
	agents := agentsNS.Metadata.Name().Elem()
	ap, err := isolation.NewPolicies(ctx, "gpu-agents-network-policies", &isolation.Args{
		Namespace: agents, Allows: GPUAgentsNetworkAllows(c), Labels: labels, DenyEgress: denyEgress,
	}, opts...)
	if err != nil {
		return nil, nil, err
	}
	return append(append(deps, agentsNS), ap.Items...), agents, nil
}

// systemNamespaces are the namespaces Kubernetes itself keeps; every kube-* is refused too
// (kube-system, kube-public, kube-node-lease and the clouds' own, such as GKE's kube-*).
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// isSystemNamespace reports whether Kubernetes or a cloud keeps the namespace.
func isSystemNamespace(ns string) bool {
	return slices.Contains(systemNamespaces, ns) || strings.HasPrefix(ns, "kube-")
}

// validateIsolation checks what the namespaces need of the config: not a namespace of the
// cluster's own (the stack applies with force, installs a default-deny over its pods and deletes
// it on destroy), and a GPU agents' namespace name that is a DNS label. That Dask worker
// processes stay within the port ranges the policies open the carriers check themselves
// (components/dask/config.go).
func (c *Config) validateIsolation(v *Validator) {
	switch ns := c.Namespace; {
	case isSystemNamespace(ns): // and so is its <namespace>-gpu-agents
		v.add("namespace", ns, fmt.Sprintf("the cluster's own namespace: the stack would take it over (adopt it, deny all ingress "+
			"to its pods, delete it on destroy); allowed: a namespace of the stack's own, not %s or kube-*, e.g. kolotoc-<stack>",
			strings.Join(systemNamespaces, ", ")))
	case strings.HasSuffix(ns, GPUAgentsSuffix):
		v.add("namespace", ns, fmt.Sprintf("ends in %s, the GPU agents' namespace of the stack in %s: the stack would take it over; "+
			"allowed: a name without that suffix", GPUAgentsSuffix, strings.TrimSuffix(ns, GPUAgentsSuffix)))
	}
	if name := c.GPUAgentsNamespace(); name != "" && len(c.Namespace) <= validation.DNS1123LabelMaxLength {
		if len(name) > validation.DNS1123LabelMaxLength {
			v.add("namespace", c.Namespace, fmt.Sprintf("at most %d characters with GPU nodes: the device plugin and DCGM exporter run in %q, which must be a DNS label too",
				validation.DNS1123LabelMaxLength-len(GPUAgentsSuffix), name))
		}
	}
}
