package stacks

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/dask"
	"kolotoc/components/datain"
	"kolotoc/components/elastic"
	"kolotoc/components/entrypoint"
	"kolotoc/components/etcd"
	"kolotoc/components/fabric"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/components/ring"
	"kolotoc/components/tfcluster"
)

// How the stack composes the training workloads: each is one entry of workloads, which says
// whether the config enables it, registers it, and gives the NetworkPolicy allows its traffic
// needs and its stack outputs. Its section's type, defaults and checks are its package's; what
// one workload takes from another (the sentinels beside the towers, the elastic workers' etcd,
// what Prometheus scrapes) its entry reads from the Config. The entrypoint, which every stack
// runs and the others reach, is composed in deploy.go.

// workload is one workload package as the stack composes it.
type workload struct {
	key     string // kolotoc:<key>
	enabled func(c *Config) bool
	deploy  func(ctx *pulumi.Context, c *Config, w *wiring) error
	allows  func(c *Config) []isolation.Allow // nil: none of its own
	outputs func(c *Config, kube KubeAccess) pulumi.Map
}

// wiring is what the stack hands each workload's deploy.
type wiring struct {
	site  meta.Site         // what every workload takes from the stack, its namespace input set
	pools []pulumi.Resource // the simulated node pools: what pods that mount nothing wait for
	mount []pulumi.Resource // the pools, the shared claim and its owner Job: what pods that mount the claim wait for
	queue []pulumi.Resource // the stack's queue (queue.go): what queued pods also wait for; none without one
	// namespaceUID names this life of the namespace (etcd's static volumes); agents is the GPU
	// agents' namespace (the DCGM exporter's), nil when there is none.
	namespaceUID, agents pulumi.StringInput
	// etcd is the etcd StatefulSet once registered (the elastic workers wait for it): the
	// StatefulSet, not the component, since the SDK adds a child to its component from the
	// child's registration goroutine, so a dependency on the component may miss it.
	etcd pulumi.Resource
	// opts carry the Kubernetes provider and what every workload waits for (the namespace, the
	// cluster, the NetworkPolicies, the pull Secrets).
	opts []pulumi.ResourceOption
}

// workloads in the order the stack registers them: etcd before the elastic workers that wait
// for it.
var workloads = []workload{
	{
		key: ring.Key, enabled: func(c *Config) bool { return c.Towers.Enabled },
		deploy: deployTowers,
		allows: func(*Config) []isolation.Allow { return ring.Allows() }, // MPI: ssh, then orted and ranks on any port
		outputs: func(c *Config, kube KubeAccess) pulumi.Map {
			return ring.Outputs(TowerName, LauncherName, c.Namespace, c.Towers.Count, kube.Kubectlf)
		},
	},
	{
		key: dask.CarriersKey, enabled: func(c *Config) bool { return c.Carriers.Enabled },
		deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
			a := CarrierArgs(c)
			a.Site = w.site.WithPodDeps(w.mount...)
			_, err := dask.NewCarriers(ctx, "carriers", a, w.opts...)
			return err
		},
		// The Dask workers' allow spans the scheduler, the carriers and the sentinels: NetworkAllows.
		outputs: func(c *Config, kube KubeAccess) pulumi.Map {
			return dask.Outputs(CarrierName, c.Namespace, c.Carriers.Count, kube.Kubectlf)
		},
	},
	{
		key: etcd.Key, enabled: func(c *Config) bool { return c.Etcd.Enabled },
		deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
			a := EtcdArgs(c)
			a.Site = w.site.WithPodDeps(w.pools...)
			if a.StaticVolumes {
				a.VolumeID = w.namespaceUID
			}
			e, err := etcd.New(ctx, "etcd", a, w.opts...)
			if err == nil {
				w.etcd = e.StatefulSet
			}
			return err
		},
		allows: func(c *Config) []isolation.Allow {
			var clients []string // the elastic workers, when their rendezvous is etcd
			if c.Elastic.Enabled && c.Elastic.RdzvBackend != RdzvC10d {
				clients = append(clients, elastic.Component)
			}
			return etcd.Allows(clients) // client and peer ports
		},
		outputs: func(c *Config, _ KubeAccess) pulumi.Map { return etcd.Outputs(EtcdName, c.Namespace) },
	},
	{
		key: elastic.Key, enabled: func(c *Config) bool { return c.Elastic.Enabled },
		deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
			a := ElasticArgs(c)
			var deps []pulumi.Resource
			if a.RdzvBackend != elastic.BackendC10d && w.etcd != nil {
				// Workers started before etcd is ready would spend their join timeout failing.
				deps = append(deps, w.etcd)
			}
			a.Site = w.site.WithPodDeps(append(deps, w.mount...)...)
			_, err := elastic.New(ctx, "elastic", a, w.opts...)
			return err
		},
		allows:  func(*Config) []isolation.Allow { return elastic.Allows() }, // worker to worker, any port
		outputs: func(c *Config, kube KubeAccess) pulumi.Map { return elastic.Outputs(ElasticArgs(c), kube.Kubectlf) },
	},
	{
		key: tfcluster.Key, enabled: func(c *Config) bool { return c.TFCluster.Enabled },
		deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
			a := TFClusterArgs(c)
			a.Site = w.site.WithPodDeps(append(append([]pulumi.Resource{}, w.mount...), w.queue...)...)
			_, err := tfcluster.New(ctx, "tfcluster", a, w.opts...)
			return err
		},
		allows:  func(c *Config) []isolation.Allow { return tfcluster.Allows(TFClusterArgs(c)) }, // the tasks' gRPC port, its own TensorBoard
		outputs: func(c *Config, kube KubeAccess) pulumi.Map { return tfcluster.Outputs(TFClusterArgs(c), kube.Kubectlf) },
	},
	{
		key: monitoring.Key, enabled: func(c *Config) bool { return c.Monitoring.Enabled },
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
	},
}

// deployWorkloads registers every workload the config enables, in order.
func deployWorkloads(ctx *pulumi.Context, c *Config, w *wiring) error {
	for _, wl := range workloads {
		if !wl.enabled(c) {
			continue
		}
		if err := wl.deploy(ctx, c, w); err != nil {
			return err
		}
	}
	return nil
}

// deployTowers registers the ring, with a Dask sentinel beside each tower when sentinels run.
func deployTowers(ctx *pulumi.Context, c *Config, w *wiring) error {
	a := TowerArgs(c)
	a.Site = w.site.WithPodDeps(append(append([]pulumi.Resource{}, w.mount...), w.queue...)...)
	if c.Sentinels.Enabled {
		a.Sidecars = append(a.Sidecars, dask.Sentinel(c.Sentinels, c.Carriers,
			entrypoint.SchedulerAddress(EntryName, c.Namespace), a.Site, c.nodeGPUMetrics()))
		a.ShareProcesses = c.Sentinels.WatchProcesses // sentinels.watchProcesses
	}
	a.SSHKeySeed = pulumi.ToSecret(pulumi.String(c.SSHKeySeed.Reveal())).(pulumi.StringOutput)
	a.KeyBinding = ring.Binding{Project: ctx.Project(), Stack: ctx.Stack(), Namespace: c.Namespace}
	_, err := ring.New(ctx, "towers", a, w.opts...)
	return err
}

// workloadAllows are the NetworkPolicy allows of every workload the config enables.
func workloadAllows(c *Config) []isolation.Allow {
	var out []isolation.Allow
	for _, wl := range workloads {
		if wl.enabled(c) && wl.allows != nil {
			out = append(out, wl.allows(c)...)
		}
	}
	return out
}

// daskWorkers are the components whose pods run Dask workers: the carriers, and the towers
// when sentinels run beside them.
func daskWorkers(c *Config) []string {
	out := []string{}
	if c.Carriers.Enabled {
		out = append(out, dask.CarrierComponent)
	}
	if c.Towers.Enabled && c.Sentinels.Enabled {
		out = append(out, ring.TowerComponent)
	}
	return out
}

// TowerArgs is the ring's configuration, less its site's namespace input and PodDeps, the
// sentinels beside the towers and the ssh keys' seed and binding.
func TowerArgs(c *Config) *ring.Args {
	t := c.Towers
	return &ring.Args{
		Config: t, Site: workloadSite(c), Name: TowerName, LauncherName: LauncherName,
		CPULimit:    gpuShareCPULimit(t.CPU, c.Pool(t.Pool), t.GPUsPerTower),
		WaitSeconds: int(c.AwaitDuration().Seconds()), // the launcher waits for its towers as long as Pulumi does
		Fabric:      c.towerFabric(),
		Gang:        c.towersGang(), // queue.go
	}
}

// towerFabric is what the towers take of their pool's fabric: their share of each node's EFA
// interfaces and NCCL's environment on them; zero without a fabric.
func (c *Config) towerFabric() ring.Fabric {
	p := c.Pool(c.Towers.Pool)
	if p == nil {
		return ring.Fabric{}
	}
	f := c.PoolFabric(*p)
	n := f.PerPod(c.Towers.GPUsPerTower, p.GPUsPerNode)
	if n == 0 {
		return ring.Fabric{}
	}
	return ring.Fabric{Resource: fabric.EFAResource, PerTower: n, Env: f.FabricEnv()}
}

// CarrierArgs is the carriers' configuration, less their site's namespace input and PodDeps.
func CarrierArgs(c *Config) *dask.CarrierArgs {
	return &dask.CarrierArgs{
		CarriersConfig: c.Carriers, Site: workloadSite(c), Name: CarrierName,
		Scheduler: entrypoint.SchedulerAddress(EntryName, c.Namespace),
	}
}

// EtcdArgs is the etcd component's configuration, less its site's namespace input and PodDeps.
// The simulated cloud has no volume provisioner: its members get static volumes unless a class
// is named.
func EtcdArgs(c *Config) *etcd.Args {
	return &etcd.Args{
		Config: c.Etcd, Site: workloadSite(c), Name: EtcdName,
		StaticVolumes: c.Cloud == CloudSimulated && c.Etcd.StorageClass == "",
	}
}

// ElasticArgs is the elastic workers' configuration, less their site's namespace input and
// PodDeps.
func ElasticArgs(c *Config) *elastic.Args {
	el := c.Elastic
	a := &elastic.Args{
		Config: el, Site: workloadSite(c), Name: ElasticName,
		CPULimit:      gpuShareCPULimit(el.CPU, c.Pool(el.Pool), el.GPUsPerNode),
		CheckpointDir: fmt.Sprintf("%s/checkpoints/%s", c.Storage.MountPath, el.RdzvID),
	}
	a.Gang, a.ExtraPriority = c.elasticGang() // queue.go
	if el.RdzvBackend != RdzvC10d {
		a.EtcdEndpoint = etcd.ClientEndpoint(EtcdName, c.Namespace)
	}
	return a
}

// TFClusterArgs is the TensorFlow cluster's configuration, less its site's namespace input and
// PodDeps. Its logs go under the entrypoint's TensorBoard log directory (storage.mountPath/logs),
// so that TensorBoard shows them; the cluster runs its own TensorBoard only when the entrypoint
// runs none.
func TFClusterArgs(c *Config) *tfcluster.Args {
	on := func(dir string) string {
		return strings.TrimRight(c.Storage.MountPath, "/") + "/" + strings.Trim(dir, "/")
	}
	a := &tfcluster.Args{
		Config: c.TFCluster, Site: workloadSite(c), ScriptsName: TFScriptsName,
		LogDir:        on(c.TFCluster.LogDir),        // tfcluster.logDir
		CheckpointDir: on(c.TFCluster.CheckpointDir), // tfcluster.checkpointDir
	}
	if c.TFCluster.EvalDir != "" {
		a.EvalDir = on(c.TFCluster.EvalDir)
	}
	// The cluster's own TensorBoard reads logs/ as the entrypoint's does, or the log directory
	// itself when it lies elsewhere.
	tbLogDir := on("logs")
	if !strings.HasPrefix(strings.Trim(c.TFCluster.LogDir, "/")+"/", "logs/") {
		tbLogDir = a.LogDir
	}
	a.Tasks = a.Config.Tasks(func(r tfcluster.Role) string { return gpuShareCPULimit(r.CPU, c.Pool(r.Pool), r.GPUs) })
	a.Gang = c.tfGang(a.Tasks) // queue.go
	if c.tfOwnTensorBoard() {
		a.OwnTensorBoard = &tfcluster.TensorBoard{
			Name: TFTensorBoard, Image: c.TFCluster.TensorBoardImage, Pool: c.Entrypoint.Pool, LogDir: tbLogDir,
		}
	}
	return a
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

// nodeGPUMetrics is where a sentinel watching GPUs reads its node's (sentinels.watchGPUs): the
// DCGM exporter's node-local Service; "" when the sentinels do not watch them.
func (c *Config) nodeGPUMetrics() string {
	if !c.Sentinels.Enabled || !c.Sentinels.WatchGPUs || !c.Monitoring.Enabled || !c.Monitoring.DCGMOn() {
		return ""
	}
	return monitoring.NodeGPUMetricsURL(c.GPUAgentsNamespace()) // never "" with the exporter on
}

// DataInArgs is the data-in Job's configuration, less its site's namespace input and PodDeps.
func DataInArgs(c *Config) *datain.Args {
	return &datain.Args{Config: c.DataIn, Site: workloadSite(c), Name: DataInName}
}

// WorkloadOutputs are the enabled workloads' stack outputs: endpoints, the commands that reach
// them, and what a training script needs to know. The one secret, Grafana's admin password, is a
// secret output (encrypted in state); the printed command shows it from the stack's state.
func WorkloadOutputs(c *Config, kube KubeAccess) pulumi.Map {
	out := pulumi.Map{}
	if c.DataIn.Enabled {
		for k, v := range datain.Outputs(DataInArgs(c), kube.Kubectlf) {
			out[k] = v
		}
	}
	for _, wl := range workloads {
		if !wl.enabled(c) {
			continue
		}
		for k, v := range wl.outputs(c, kube) {
			out[k] = v
		}
	}
	return out
}
