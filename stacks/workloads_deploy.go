package stacks

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/elastic"
	"kolotoc/components/etcd"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/components/storage"
	"kolotoc/components/tfcluster"
)

// deployWorkloads registers the optional workloads the stack enables (their outputs are
// WorkloadOutputs). agents is the GPU agents' namespace (the DCGM exporter's), nil when there is
// none; namespaceUID names this life of the namespace (etcd's static volumes). opts carry the Kubernetes provider and what every workload waits for (the namespace, the
// cluster, the NetworkPolicies, the pull Secrets). Their pods also wait for the simulated node
// pools, and those that mount the shared claim for mount (the pools, the claim and its owner Job).
func deployWorkloads(ctx *pulumi.Context, c *Config, namespace, namespaceUID, agents pulumi.StringInput, pools, mount []pulumi.Resource, opts ...pulumi.ResourceOption) error {
	var store pulumi.Resource
	if c.Etcd.Enabled {
		a := EtcdArgs(c)
		a.Namespace = namespace
		if a.StaticVolumes {
			a.VolumeID = namespaceUID
		}
		a.PodDeps = pools
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
		a.Namespace = namespace
		if a.Backend != elastic.BackendC10d && store != nil {
			// Workers started before etcd is ready would spend their join timeout failing.
			a.PodDeps = []pulumi.Resource{store}
		}
		a.PodDeps = append(a.PodDeps, mount...)
		if _, err := elastic.New(ctx, "elastic", a, opts...); err != nil {
			return err
		}
	}
	if c.TFCluster.Enabled {
		a := TFClusterArgs(c)
		a.Namespace = namespace
		a.PodDeps = mount
		if _, err := tfcluster.New(ctx, "tfcluster", a, opts...); err != nil {
			return err
		}
	}
	if c.Monitoring.Enabled {
		a := MonitoringArgs(c)
		a.Namespace = namespace
		if a.Grafana {
			a.GrafanaPassword = pulumi.ToSecret(pulumi.String(c.GrafanaPassword.Reveal())).(pulumi.StringOutput)
		}
		a.AgentsNamespace = agents
		a.PodDeps = pools
		if _, err := monitoring.New(ctx, "monitoring", a, opts...); err != nil {
			return err
		}
	}
	return nil
}

func workloadLabels(c *Config) meta.Labels { return stackLabels(c) }

func workloadScratch(c *Config) storage.ScratchArgs {
	s := c.Storage.Scratch
	out := storage.ScratchArgs{SizeLimit: s.SizeLimit, MountPath: s.MountPath}
	if s.Type == ScratchHostPath {
		out.HostPath = s.Path
	}
	return out
}

// EtcdArgs is the etcd component's configuration, less its namespace input. The simulated
// cloud has no volume provisioner: its members get static volumes unless a class is named.
func EtcdArgs(c *Config) *etcd.Args {
	e := c.Etcd
	return &etcd.Args{
		NamespaceDNS: c.Namespace, Name: EtcdName, Members: e.Members, Image: e.Image, Pool: e.Pool,
		CPU: e.CPU, Memory: e.Memory, StorageSize: e.StorageSize, StorageClass: e.StorageClass,
		StaticVolumes: c.Cloud == CloudSimulated && e.StorageClass == "",
		Labels:        workloadLabels(c),
	}
}

// ElasticArgs is the elastic workers' configuration, less their namespace input.
func ElasticArgs(c *Config) *elastic.Args {
	el := c.Elastic
	a := &elastic.Args{
		NamespaceDNS: c.Namespace, Name: ElasticName,
		Nodes: el.Nodes, MinNodes: el.MinNodes, MaxNodes: el.MaxNodes, GPUsPerNode: el.GPUsPerNode,
		CPU: el.CPU, CPULimit: gpuShareCPULimit(el.CPU, c.Pool(el.Pool), el.GPUsPerNode),
		Memory: el.Memory, Image: el.Image, Command: el.Command,
		Backend: el.RdzvBackend, RdzvID: el.RdzvID, RdzvPort: el.RdzvPort, MaxRestarts: el.MaxRestarts,
		Pool: el.Pool, Claim: StorageName, MountPath: c.Storage.MountPath,
		CheckpointDir: fmt.Sprintf("%s/checkpoints/%s", c.Storage.MountPath, el.RdzvID),
		Scratch:       workloadScratch(c), Labels: workloadLabels(c),
		OnSuccess: el.OnSuccess, Suspend: c.Suspend, Env: envVars(el.Env), Code: CodeArgs(c),
		RunAsUser: c.RunAsUser,
	}
	if el.RdzvBackend != RdzvC10d {
		a.EtcdEndpoint = etcd.ClientEndpoint(EtcdName, c.Namespace)
	}
	return a
}

// TFClusterArgs is the TensorFlow cluster's configuration, less its namespace input. Its logs go
// under the entrypoint's TensorBoard log directory (storage.mountPath/logs), so that TensorBoard
// shows them; the cluster runs its own TensorBoard only when the entrypoint runs none.
func TFClusterArgs(c *Config) *tfcluster.Args {
	tf := c.TFCluster
	a := &tfcluster.Args{
		NamespaceDNS: c.Namespace, ScriptsName: TFScriptsName, Port: tf.Port, Image: tf.Image, Command: tf.Command,
		Claim: StorageName, MountPath: c.Storage.MountPath,
		LogDir:        c.Storage.MountPath + "/logs/tfcluster",
		CheckpointDir: c.Storage.MountPath + "/checkpoints/tfcluster",
		Scratch:       workloadScratch(c), Labels: workloadLabels(c),
		OnSuccess: tf.OnSuccess, Suspend: c.Suspend, Env: envVars(tf.Env), Code: CodeArgs(c),
		RunAsUser: c.RunAsUser,
	}
	for _, r := range c.tfRoles() {
		a.Tasks = append(a.Tasks, tfcluster.Task{
			Type: r.Type, Name: r.Name, Count: r.Role.Count, GPUs: r.Role.GPUs,
			CPU: r.Role.CPU, Memory: r.Role.Memory, Pool: r.Role.Pool,
			CPULimit: gpuShareCPULimit(r.Role.CPU, c.Pool(r.Role.Pool), r.Role.GPUs),
		})
	}
	if c.tfOwnTensorBoard() {
		a.TensorBoard = &tfcluster.TensorBoard{
			Name: TFTensorBoard, Image: tf.TensorBoardImage, Pool: c.Entrypoint.Pool, LogDir: c.Storage.MountPath + "/logs",
		}
	}
	return a
}

// MonitoringArgs is the monitoring's configuration, less its namespace input and password.
func MonitoringArgs(c *Config) *monitoring.Args {
	m := c.Monitoring
	return &monitoring.Args{
		NamespaceDNS: c.Namespace, Pool: m.Pool,
		PrometheusImage: m.PrometheusImage, GrafanaImage: m.GrafanaImage, DCGMImage: m.DCGMImage,
		DCGMExporter: *m.DCGMExporter, Grafana: *m.Grafana, ScrapeInterval: m.ScrapeInterval, Retention: m.Retention,
		StorageSize: m.StorageSize, Labels: workloadLabels(c),
		AgentsNamespaceDNS: c.GPUAgentsNamespace(),
	}
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
