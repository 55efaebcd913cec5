package stacks

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cluster"
	"kolotoc/components/deviceplugin"
	"kolotoc/components/entrypoint"
	"kolotoc/components/fabric"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
)

// RawFromEnv reads the stack's configuration the way the Pulumi Go SDK does (PULUMI_CONFIG and
// PULUMI_CONFIG_SECRET_KEYS, set by the language host), so that Load sees every key — including
// misspelled ones, which the SDK's per-key getters would silently never ask for.
func RawFromEnv(ctx *pulumi.Context) (Raw, error) {
	raw := Raw{Project: ctx.Project(), Stack: ctx.Stack(), Values: map[string]string{}, Secrets: map[string]bool{}}
	if s := os.Getenv(pulumi.EnvConfig); s != "" {
		if err := json.Unmarshal([]byte(s), &raw.Values); err != nil {
			return raw, fmt.Errorf("reading %s: %w", pulumi.EnvConfig, err)
		}
	}
	for k := range raw.Values {
		raw.Secrets[k] = ctx.IsConfigSecret(k)
	}
	DropProjectDefaults(&raw) // Pulumi.yaml's defaults: keys the stack leaves unset (keys.go)
	return raw, previewCopy(&raw, ctx.DryRun())
}

// Deploy registers the whole environment described by a validated Config and exports its
// outputs.
func Deploy(ctx *pulumi.Context, c *Config) error { return DeployTo(ctx, c, ctx.Export) }

// DeployTo is Deploy handing each stack output to export (tests collect them).
func DeployTo(ctx *pulumi.Context, c *Config, export func(string, pulumi.Input)) error {
	if err := deployTo(ctx, c, export); err != nil {
		return err
	}
	// The components register their outputs while the program goes on (meta.RegisterOutputs).
	return meta.WaitOutputs(ctx)
}

func deployTo(ctx *pulumi.Context, c *Config, export func(string, pulumi.Input)) error {
	labels := stackLabels(c)
	// Every awaited workload, Service and claim waits kolotoc:awaitTimeout (timeouts.go).
	if err := registerAwaitTimeouts(ctx, c); err != nil {
		return err
	}
	if err := registerFit(ctx, c); err != nil { // make fit's throw-away stacks only (fit.go)
		return err
	}

	// Before anything is registered: a change that would replace protected storage stops here,
	// and so does a namespace that exists and is not the stack's (adopt.go).
	if err := guardStorage(ctx, c); err != nil {
		return err
	}
	retain, err := checkNamespaceAdoption(c, clusterNamespaces(c), ctx.DryRun(), func(msg string) { _ = ctx.Log.Warn(msg, nil) })
	if err != nil {
		return err
	}

	provider, clusterDeps, cloud, err := deployClusterOrCloud(ctx, c, labels)
	if err != nil {
		return err
	}
	kube, err := stackKubeAccess(c, cloud)
	if err != nil {
		return err
	}
	k8s := pulumi.Provider(provider)

	// The simulated pools are registered first: the engine starts at most --parallel steps at
	// once, in registration order, and making the nodes is the longest step pods wait for.
	sim, err := deployNodes(ctx, c, labels, provider)
	if err != nil {
		return err
	}
	// The namespace enforces its Pod Security level; its NetworkPolicies exist before any pod.
	ns, err := corev1.NewNamespace(ctx, c.Namespace, isolation.Render(c.Namespace, PodSecurity(c), labels, "namespace"), k8s, pulumi.RetainOnDelete(retain))
	if err != nil {
		return err
	}
	namespace := ns.Metadata.Name().Elem()
	// The policies wait for the namespace through its name; the GPU agents' namespace does not
	// wait for it, so that a destroy deletes the two namespaces at once (each takes its
	// controller about 5 s), not one after the other.
	policies, agents, err := deployIsolation(ctx, c, namespace, labels, k8s, pulumi.DependsOn(clusterDeps))
	if err != nil {
		return err
	}
	after := pulumi.DependsOn(append([]pulumi.Resource{ns}, clusterDeps...))
	pullSecrets, err := deployRegistries(ctx, c, namespace, agents, k8s, after)
	if err != nil {
		return err
	}
	// The stack's queue (queue.go), before the queued workloads' pods, which name it.
	queued, err := deployQueue(ctx, c, namespace, k8s, after)
	if err != nil {
		return err
	}
	// What the pods wait for besides their objects' dependencies: the node pools they may be placed
	// on. Only pods wait for nodes: the Secrets, ConfigMaps and Services are made while the nodes
	// are (on the simulated cloud, with hundreds of nodes, that is the longest wait).
	var pools []pulumi.Resource
	if sim != nil {
		pools = sim.Pools
	}
	// The workloads wait for the namespace, the cluster, their NetworkPolicies and pull Secrets;
	// the storage does not, so that `pulumi destroy --exclude-protected` keeps only the protected
	// storage and what it truly needs.
	workloadDeps := append(append(append([]pulumi.Resource{ns}, clusterDeps...), policies...), pullSecrets...)

	// The store's own pods (the in-cluster server, the owner Job) pull images and wait for their
	// pool only: the server is made while the GPU pools' nodes are, not after them.
	storageArgs := StorageArgs(c, namespace, labels, cloud.volume(),
		append(append([]pulumi.Resource{}, pullSecrets...), sim.PoolOf(c.Entrypoint.Pool)...))
	shared, err := storage.New(ctx, "storage", storageArgs, k8s, pulumi.DependsOn(append([]pulumi.Resource{ns}, clusterDeps...)))
	if err != nil {
		return err
	}
	if *c.DevicePlugin.Enabled {
		if _, err := deviceplugin.New(ctx, "device-plugin", &deviceplugin.Args{
			Namespace: agents, Image: c.DevicePlugin.Image, Labels: labels,
		}, k8s, pulumi.DependsOn(append(append([]pulumi.Resource{}, workloadDeps...), pools...))); err != nil {
			return err
		}
	}
	if c.EFAPools() { // EFA interfaces: advertised as vpc.amazonaws.com/efa (components/fabric)
		if _, err := fabric.NewPlugin(ctx, "efa-device-plugin", &fabric.Args{
			Namespace: agents, Image: c.Fabric.EFAPluginImage, Labels: labels,
		}, k8s, pulumi.DependsOn(append(append([]pulumi.Resource{}, workloadDeps...), pools...))); err != nil {
			return err
		}
	}

	// Only the workloads' pods (and the launcher) wait for the pools and the claim (PodDeps), not
	// their Secrets, ConfigMaps and Services, which then exist by the time both are ready.
	withDeps := pulumi.DependsOn(workloadDeps)
	mount := append(append([]pulumi.Resource{}, pools...), shared.Ready...)
	site := WorkloadSite(c)
	site.Namespace = namespace

	// The workloads, the entrypoint and the data-in Job first (workloads.go).
	w := &Wiring{
		Site: site, Pools: pools, Mount: mount, Queue: queued, NamespaceUID: ns.Metadata.Uid().Elem(), Agents: agents,
		Opts: []pulumi.ResourceOption{k8s, withDeps},
	}
	if err := deployWorkloads(ctx, c, w); err != nil {
		return err
	}

	for _, outs := range []pulumi.Map{
		StackOutputs(c, w.EntryArgs, kube), WorkloadOutputs(c, kube), QueueOutputs(c, kube),
		kube.outputs(),                      // kubeContext, kubeconfigCommand
		publicOutputs(w.Entry, w.EntryArgs), // the LoadBalancer's address
		cloud.exports(),                     // clusterName, kubeconfig (a secret), the file store
	} {
		for k, v := range outs {
			export(k, v)
		}
	}
	return nil
}

// stackLabels are the labels of every object of the stack. On the simulated cloud several stacks
// share one local cluster, so pools are selected within the stack's own nodes; a real pool is
// the local cluster's real node(s), selected by their own label.
func stackLabels(c *Config) meta.Labels {
	l := meta.Labels{Instance: c.Stack, Version: Version, PullSecrets: PullSecrets(c)}
	for _, p := range c.NodePools {
		if p.Autoscaled() {
			if l.AutoscaledPools == nil {
				l.AutoscaledPools = map[string]bool{}
			}
			l.AutoscaledPools[p.Name] = true
		}
	}
	if c.CloudEntry().Local {
		l.Cluster = c.Cluster.Name
		for _, p := range c.NodePools {
			if p.Real {
				if l.RealPools == nil {
					l.RealPools = map[string]bool{}
				}
				l.RealPools[p.Name] = true
			}
		}
	}
	return l
}

// WorkloadSite is what every workload takes from the stack (meta.Site), less the namespace input
// and what the pods wait for, which deploy sets.
func WorkloadSite(c *Config) meta.Site {
	return meta.Site{
		NamespaceDNS: c.Namespace, Labels: stackLabels(c), Claim: StorageName, MountPath: c.Storage.MountPath,
		Scratch: c.Storage.Scratch.Site(), RunAsUser: c.RunAsUser, Suspend: c.Suspend, Code: CodeArgs(c),
	}
}

// deployCluster returns the Kubernetes provider of the stack's simulated or existing cluster
// (the simulated cloud's Nodes come later: deployNodes); deployClusterOrCloud calls it
// for every cloud but the ones Kolotoc creates, and Validate allows no other.
func deployCluster(ctx *pulumi.Context, c *Config) (*kubernetes.Provider, error) {
	kubeconfig, err := os.ReadFile(c.Cluster.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s:cluster.kubeconfig = %s: %v%s", ConfigNamespace, c.Cluster.Kubeconfig, err, c.CloudEntry().KubeconfigHint)
	}
	pargs := &kubernetes.ProviderArgs{
		Kubeconfig: pulumi.ToSecret(pulumi.String(string(kubeconfig))).(pulumi.StringOutput),
		// Only a change of cluster replaces the provider (and so every object); a kubeconfig
		// with new credentials for the same cluster is an update.
		ClusterIdentifier:     pulumi.String(c.Cluster.Name),
		EnableServerSideApply: pulumi.Bool(true),
	}
	if c.Cluster.Context != "" {
		pargs.Context = pulumi.String(c.Cluster.Context)
	}
	return kubernetes.NewProvider(ctx, "k8s", pargs)
}

// deployNodes registers the cluster's nodes where its cloud registers them (the simulated pools:
// its entry's Nodes), nil elsewhere; pods must wait for them.
func deployNodes(ctx *pulumi.Context, c *Config, labels meta.Labels, provider *kubernetes.Provider) (*cluster.Simulated, error) {
	if cl := c.CloudEntry(); cl.Nodes != nil {
		return cl.Nodes(ctx, c, labels, provider)
	}
	return nil, nil
}

// SimulatedPool is the simulated form of a configured pool: the same labels, taints and capacity.
// A spot pool's nodes carry the spot label of the cloud whose catalogue names its machine type,
// as that cloud's spot nodes do (none for a machine type no cloud here names); a pool with a
// fabric carries its label and advertises its devices (EFA interfaces), and a compact pool its
// one zone, as the cloud's nodes would.
func (c *Config) SimulatedPool(p NodePool) cluster.Pool {
	taints := make([]cluster.Taint, len(p.Taints))
	for i, t := range p.Taints {
		taints[i] = cluster.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
	}
	labels := map[string]string{}
	if key := spotLabel(p); key != "" {
		labels[key] = meta.SpotLabels[key]
	}
	f := c.PoolFabric(p)
	var devices map[string]string
	if f.EFAs > 0 {
		labels[fabric.Label] = fabric.EFA
		devices = map[string]string{fabric.EFAResource: fmt.Sprint(f.EFAs)}
		if f.HugePages { // what the pods request beside the interfaces (PodFabric)
			devices[fabric.HugePagesResource] = fmt.Sprintf("%dMi", fabric.NodeHugePagesMi)
		}
	}
	for name, q := range p.Devices.Values { // nodePools[i].devices: RDMA HCAs, huge pages, …
		if devices == nil {
			devices = map[string]string{}
		}
		devices[name] = q
	}
	for k, v := range p.Labels {
		labels[k] = v
	}
	if len(labels) == 0 {
		labels = nil
	}
	return cluster.Pool{
		Name: p.Name, Nodes: p.Nodes, MachineType: p.MachineType, GPUsPerNode: p.GPUsPerNode, GPUType: p.GPUType,
		CPUs: p.CPUs, Memory: p.Memory, Labels: labels, Taints: taints, Zone: f.Zone, Devices: devices,
		Autoscaled: c.karpenterPool(p), MaxNodes: p.MaxNodes, Spot: p.Spot, ScaleDownAfter: p.ScaleDownAfter,
	}
}

// spotLabel is the spot label key of a spot pool's cloud (its entry's SpotLabel), "" for an
// on-demand pool or a machine type of no catalogued cloud.
func spotLabel(p NodePool) string {
	if !p.Spot {
		return ""
	}
	cloud, ok := catalogueCloud("", p.MachineType)
	if !ok {
		return ""
	}
	return cloudNamed(cloud).SpotLabel
}

// Secret stack outputs, and the command that shows one.
const (
	JupyterPasswordOutput = "jupyterPassword"
	GrafanaPasswordOutput = "grafanaPassword"
)

// ShowSecretCommand prints a secret output of the stack. It reads the stack's state rather than
// its config file, so it works wherever the stack keeps its secrets.
func ShowSecretCommand(c *Config, output string) string {
	return fmt.Sprintf("pulumi stack output --stack %s --show-secrets %s", c.Stack, output)
}

// StackOutputs are the stack's own outputs and the entrypoint's: the namespace, the node pools,
// the entrypoint's endpoints with the commands that reach them (the workloads' are
// WorkloadOutputs: the `kubectl exec` commands that replace the old `goto tower N` / `goto
// carrier N` helpers, the tower hostnames, …). The one secret among them, the Jupyter password, is a secret
// output (encrypted in state, shown only with --show-secrets): the printed command reads it from
// the stack, which works wherever the stack's config is kept (a shadow config file included).
func StackOutputs(c *Config, e *entrypoint.Args, kube KubeAccess) pulumi.Map {
	out := pulumi.Map{"namespace": pulumi.String(c.Namespace)}
	if agents := c.GPUAgentsNamespace(); agents != "" {
		out["gpuAgentsNamespace"] = pulumi.String(agents) // the device plugin and DCGM exporter (security.go)
	}
	for k, v := range entrypoint.Outputs(e, kube.Kubectlf) {
		out[k] = v
	}
	if c.Entrypoint.Jupyter { // the password is the stack's secret (kolotoc:jupyterPassword)
		out[JupyterPasswordOutput] = pulumi.ToSecret(pulumi.String(c.JupyterPassword.Reveal()))
		out["jupyterPasswordCommand"] = pulumi.String(ShowSecretCommand(c, JupyterPasswordOutput))
	}
	pools := make([]string, 0, len(c.NodePools))
	for _, p := range c.NodePools {
		pools = append(pools, p.Name)
	}
	sort.Strings(pools)
	out["nodePools"] = pulumi.ToStringArray(pools)
	out["poolBounds"] = poolBounds(c) // autoscale.go

	// A fit stack's growth (growth.go), which make fit reports.
	for k, v := range growthOutputs(c) {
		out[k] = v
	}
	return out
}
