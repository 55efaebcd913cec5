package stacks

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/elastic"
	"kolotoc/components/etcd"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/components/tfcluster"
)

// deployWorkloads registers the optional workloads the stack enables (their outputs are
// WorkloadOutputs). site is what every workload takes from the stack, its namespace input set;
// namespaceUID names this life of the namespace (etcd's static volumes); agents is the GPU
// agents' namespace (the DCGM exporter's), nil when there is none. opts carry the Kubernetes
// provider and what every workload waits for (the namespace, the cluster, the NetworkPolicies,
// the pull Secrets). Their pods also wait for the simulated node pools, and those that mount the
// shared claim for mount (the pools, the claim and its owner Job).
func deployWorkloads(ctx *pulumi.Context, c *Config, site meta.Site, namespaceUID, agents pulumi.StringInput, pools, mount []pulumi.Resource, opts ...pulumi.ResourceOption) error {
	var store pulumi.Resource
	if c.Etcd.Enabled {
		a := EtcdArgs(c)
		a.Site = site.WithPodDeps(pools...)
		if a.StaticVolumes {
			a.VolumeID = namespaceUID
		}
		e, err := etcd.New(ctx, "etcd", a, opts...)
		if err != nil {
			return err
		}
		// The StatefulSet, not the component: the SDK adds a child to its component from the
		// child's registration goroutine, so a dependency on the component may miss it.
		store = e.StatefulSet
	}
	if c.Elastic.Enabled {
		a := ElasticArgs(c)
		var deps []pulumi.Resource
		if a.RdzvBackend != elastic.BackendC10d && store != nil {
			// Workers started before etcd is ready would spend their join timeout failing.
			deps = append(deps, store)
		}
		a.Site = site.WithPodDeps(append(deps, mount...)...)
		if _, err := elastic.New(ctx, "elastic", a, opts...); err != nil {
			return err
		}
	}
	if c.TFCluster.Enabled {
		a := TFClusterArgs(c)
		a.Site = site.WithPodDeps(mount...)
		if _, err := tfcluster.New(ctx, "tfcluster", a, opts...); err != nil {
			return err
		}
	}
	if c.Monitoring.Enabled {
		a := MonitoringArgs(c)
		a.Site = site.WithPodDeps(pools...)
		if a.GrafanaOn() {
			a.GrafanaPassword = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal())).(pulumi.StringOutput)
		}
		a.AgentsNamespace = agents
		if _, err := monitoring.New(ctx, "monitoring", a, opts...); err != nil {
			return err
		}
	}
	return nil
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
	a := &tfcluster.Args{
		Config: c.TFCluster, Site: workloadSite(c), ScriptsName: TFScriptsName,
		LogDir:        c.Storage.MountPath + "/logs/tfcluster",
		CheckpointDir: c.Storage.MountPath + "/checkpoints/tfcluster",
	}
	for _, r := range c.tfRoles() {
		a.Tasks = append(a.Tasks, tfcluster.Task{
			Role: *r.Role, Type: r.Type, Name: r.Name,
			CPULimit: gpuShareCPULimit(r.Role.CPU, c.Pool(r.Role.Pool), r.Role.GPUs),
		})
	}
	if c.tfOwnTensorBoard() {
		a.OwnTensorBoard = &tfcluster.TensorBoard{
			Name: TFTensorBoard, Image: c.TFCluster.TensorBoardImage, Pool: c.Entrypoint.Pool, LogDir: c.Storage.MountPath + "/logs",
		}
	}
	return a
}

// MonitoringArgs is the monitoring's configuration, less its site's namespace input and PodDeps,
// the agents' namespace input and Grafana's password.
func MonitoringArgs(c *Config) *monitoring.Args {
	return &monitoring.Args{Config: c.Monitoring, Site: workloadSite(c), AgentsNamespaceDNS: c.GPUAgentsNamespace()}
}

// WorkloadOutputs are the enabled workloads' stack outputs: endpoints, the commands that reach
// them, and what a training script needs to know. The one secret, Grafana's admin password, is a
// secret output (encrypted in state); the printed command shows it from the stack's state.
func WorkloadOutputs(c *Config, kube KubeAccess) pulumi.Map {
	out := pulumi.Map{}
	ns := c.Namespace
	if c.Etcd.Enabled {
		for k, v := range etcd.Outputs(EtcdName, ns) {
			out[k] = v
		}
	}
	if c.Elastic.Enabled {
		for k, v := range elastic.Outputs(ElasticArgs(c), kube.Kubectlf) {
			out[k] = v
		}
	}
	if c.TFCluster.Enabled {
		for k, v := range tfcluster.Outputs(TFClusterArgs(c), kube.Kubectlf) {
			out[k] = v
		}
	}
	if c.Monitoring.Enabled {
		for k, v := range monitoring.Outputs(MonitoringArgs(c), kube.Kubectlf) {
			out[k] = v
		}
		if *c.Monitoring.Grafana { // the admin password is the stack's secret (kolotoc:grafanaPassword)
			out[GrafanaPasswordOutput] = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal()))
			out["grafanaPasswordCommand"] = pulumi.String(ShowSecretCommand(c, GrafanaPasswordOutput))
		}
	}
	return out
}
