// Package monitoring watches the training environment: Prometheus scraping the NVIDIA DCGM
// exporter (a DaemonSet on GPU nodes only), the Dask scheduler and workers, and kube-state-metrics
// where a cluster runs one; Grafana with Prometheus provisioned as its data source and a GPU
// dashboard (power, temperature, utilisation and memory, per GPU and per node).
package monitoring

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// Object names; each is also the component label of its pods.
const (
	PrometheusName = "prometheus"
	GrafanaName    = "grafana"
	DCGMName       = "dcgm-exporter"
)

// Ports.
const (
	PrometheusPort = 9090
	GrafanaPort    = 3000
	DCGMPort       = 9400
)

// configHashAnnotation on a pod template carries the hash of the configuration the pod reads at
// start: a changed configuration rolls the pod, an unchanged one leaves it alone.
const configHashAnnotation = "kolotoc.dev/config-sha256"

// Args are the monitoring's inputs: its section (kolotoc:monitoring, defaulted and validated), the
// site the stack gives every workload (its namespace, labels and PodDeps: the node pools the pods
// are placed on; the ConfigMaps, Secrets, RBAC and Services do not wait for them), and what the
// stack adds.
type Args struct {
	Config
	meta.Site
	GrafanaPassword pulumi.StringInput // secret; Grafana's admin password

	// AgentsNamespace, AgentsNamespaceDNS: where the DCGM exporter runs, a namespace whose Pod
	// Security level allows its host path and capability; default Namespace.
	AgentsNamespace    pulumi.StringInput
	AgentsNamespaceDNS string

	// GPUNodes: how the DCGM exporter reaches the driver and names the GPUs on the stack's GPU
	// node image; the stack fills it from its cloud and device plugin; default the NVIDIA
	// Container Toolkit's way.
	GPUNodes GPUNodes

	// NodeWatchers are the components of the stack's namespace whose pods read their own node's
	// GPU metrics (the towers, whose sentinels watch GPUs: sentinels.watchGPUs): with the
	// exporter on, a node-local Service (NodeMetricsService) and an allow into the agents'
	// namespace let them.
	NodeWatchers []string
}

// Monitoring is Prometheus, Grafana and the DCGM exporter.
type Monitoring struct {
	pulumi.ResourceState
	PrometheusURL pulumi.StringOutput
	GrafanaURL    pulumi.StringOutput
}

// New registers the monitoring.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Monitoring, error) {
	if args == nil {
		return nil, errors.New("monitoring: args are required")
	}
	if args.GrafanaOn() && args.GrafanaPassword == nil {
		return nil, fmt.Errorf("monitoring %q: Grafana needs an admin password; there is no default", name)
	}
	m := &Monitoring{}
	if err := ctx.RegisterComponentResource("kolotoc:monitoring:Monitoring", name, m, opts...); err != nil {
		return nil, fmt.Errorf("monitoring %q: %w", name, err)
	}
	parent := pulumi.Parent(m)

	// Prometheus: its identity, what it may discover, its configuration, the server.
	sa, err := corev1.NewServiceAccount(ctx, name+"-prometheus", RenderServiceAccount(args), parent)
	if err != nil {
		return nil, fmt.Errorf("monitoring %q: ServiceAccount %q: %w", name, name+"-prometheus", err)
	}
	bindings, err := newPrometheusRBAC(ctx, name, args, sa, parent)
	if err != nil {
		return nil, fmt.Errorf("monitoring %q: %w", name, err)
	}
	promConfig, err := corev1.NewConfigMap(ctx, name+"-prometheus", RenderPrometheusConfig(args), parent)
	if err != nil {
		return nil, fmt.Errorf("monitoring %q: ConfigMap %q: %w", name, name+"-prometheus", err)
	}
	if _, err := appsv1.NewDeployment(ctx, name+"-prometheus", RenderPrometheus(args), parent,
		pulumi.DependsOn(append(append(bindings, promConfig), args.PodDeps...))); err != nil {
		return nil, fmt.Errorf("monitoring %q: Deployment %q: %w", name, name+"-prometheus", err)
	}
	if _, err := corev1.NewService(ctx, name+"-prometheus", RenderPrometheusService(args), parent); err != nil {
		return nil, fmt.Errorf("monitoring %q: Service %q: %w", name, name+"-prometheus", err)
	}

	if args.DCGMOn() {
		if _, err := appsv1.NewDaemonSet(ctx, name+"-dcgm-exporter", RenderDCGMExporter(args), parent, pulumi.DependsOn(args.PodDeps)); err != nil {
			return nil, fmt.Errorf("monitoring %q: DaemonSet %q: %w", name, name+"-dcgm-exporter", err)
		}
		if len(args.NodeWatchers) > 0 {
			if _, err := corev1.NewService(ctx, name+"-dcgm-node", RenderNodeMetricsService(args), parent); err != nil {
				return nil, fmt.Errorf("monitoring: the DCGM exporter's node-local Service: %w", err)
			}
		}
	}

	eps := Endpoints(args.NamespaceDNS, args.GrafanaOn())
	m.PrometheusURL = pulumi.String(eps["prometheus"].URL).ToStringOutput()
	outputs := pulumi.Map{"prometheusUrl": m.PrometheusURL}
	if args.GrafanaOn() {
		if err := newGrafana(ctx, name, args, parent); err != nil {
			return nil, fmt.Errorf("monitoring %q: %w", name, err)
		}
		m.GrafanaURL = pulumi.String(eps["grafana"].URL).ToStringOutput()
		outputs["grafanaUrl"] = m.GrafanaURL
	}
	return m, meta.RegisterOutputs(ctx, m, outputs)
}

// newGrafana registers Grafana: the password, the provisioned data source and dashboard, the
// server.
func newGrafana(ctx *pulumi.Context, name string, args *Args, parent pulumi.ResourceOption) error {
	secret, err := corev1.NewSecret(ctx, name+"-grafana", RenderGrafanaSecret(args), parent)
	if err != nil {
		return fmt.Errorf("Secret %q: %w", name+"-grafana", err)
	}
	provisioning, err := corev1.NewConfigMap(ctx, name+"-grafana-provisioning", RenderGrafanaProvisioning(args), parent)
	if err != nil {
		return fmt.Errorf("ConfigMap %q: %w", name+"-grafana-provisioning", err)
	}
	dashArgs, err := RenderGrafanaDashboards(args)
	if err != nil {
		return fmt.Errorf("ConfigMap %q: %w", name+"-grafana-dashboards", err)
	}
	dashboards, err := corev1.NewConfigMap(ctx, name+"-grafana-dashboards", dashArgs, parent)
	if err != nil {
		return fmt.Errorf("ConfigMap %q: %w", name+"-grafana-dashboards", err)
	}
	grafana, err := RenderGrafana(args)
	if err != nil {
		return fmt.Errorf("Deployment %q: %w", name+"-grafana", err)
	}
	if _, err := appsv1.NewDeployment(ctx, name+"-grafana", grafana, parent,
		pulumi.DependsOn(append([]pulumi.Resource{secret, provisioning, dashboards}, args.PodDeps...))); err != nil {
		return fmt.Errorf("Deployment %q: %w", name+"-grafana", err)
	}
	if _, err := corev1.NewService(ctx, name+"-grafana", RenderGrafanaService(args), parent); err != nil {
		return fmt.Errorf("Service %q: %w", name+"-grafana", err)
	}
	return nil
}

// Endpoints are Prometheus's and (with grafana) Grafana's URLs and the port-forward arguments that reach them.
func Endpoints(namespace string, grafana bool) map[string]meta.Endpoint {
	eps := map[string]meta.Endpoint{"prometheus": meta.ServiceEndpoint("http", PrometheusName, namespace, PrometheusPort, "/")}
	if grafana {
		eps["grafana"] = meta.ServiceEndpoint("http", GrafanaName, namespace, GrafanaPort, "/")
	}
	return eps
}

// RenderPrometheusConfig holds prometheus.yml.
func RenderPrometheusConfig(a *Args) *corev1.ConfigMapArgs {
	return &corev1.ConfigMapArgs{
		Metadata: a.Labels.ObjectMeta(PrometheusName, a.Namespace, PrometheusName),
		Data:     pulumi.StringMap{"prometheus.yml": pulumi.String(PrometheusConfig(a))},
	}
}

// RenderPrometheus builds the Prometheus server. Its data lives in a size-limited emptyDir:
// metrics of a training environment are worth days, not a persistent volume's upkeep.
func RenderPrometheus(a *Args) *appsv1.DeploymentArgs {
	return &appsv1.DeploymentArgs{
		Metadata: a.Labels.ObjectMeta(PrometheusName, a.Namespace, PrometheusName),
		Spec: &appsv1.DeploymentSpecArgs{
			Replicas: pulumi.Int(1),
			// Two servers must not write one TSDB: stop the old one first.
			Strategy: &appsv1.DeploymentStrategyArgs{Type: pulumi.String("Recreate")},
			Selector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(PrometheusName))},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{
					Labels:      pulumi.ToStringMap(a.Labels.PodLabels(PrometheusName)),
					Annotations: pulumi.StringMap{configHashAnnotation: pulumi.String(hash(PrometheusConfig(a)))},
				},
				Spec: &corev1.PodSpecArgs{
					NodeSelector:       a.Labels.PoolSelector(a.Pool),
					ServiceAccountName: pulumi.String(PrometheusName),
					ImagePullSecrets:   a.Labels.ImagePullSecrets(),
					// Service discovery talks to the API server with the account's token.
					AutomountServiceAccountToken: pulumi.Bool(true),
					SecurityContext:              meta.PodSecurity(65534),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String(PrometheusName),
						Image: pulumi.String(a.PrometheusImage),
						Args: pulumi.ToStringArray([]string{
							"--config.file=/etc/prometheus/prometheus.yml",
							"--storage.tsdb.path=/prometheus",
							"--storage.tsdb.retention.time=" + a.Retention,
							fmt.Sprintf("--web.listen-address=:%d", PrometheusPort),
						}),
						Ports: corev1.ContainerPortArray{corev1.ContainerPortArgs{Name: pulumi.String("web"), ContainerPort: pulumi.Int(PrometheusPort)}},
						ReadinessProbe: &corev1.ProbeArgs{
							HttpGet:       &corev1.HTTPGetActionArgs{Path: pulumi.String("/-/ready"), Port: pulumi.Int(PrometheusPort)},
							PeriodSeconds: pulumi.Int(10),
						},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("500m"), "memory": pulumi.String("2Gi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("2"), "memory": pulumi.String("4Gi")},
						},
						SecurityContext: meta.LockedDown(),
						VolumeMounts: corev1.VolumeMountArray{
							corev1.VolumeMountArgs{Name: pulumi.String("config"), MountPath: pulumi.String("/etc/prometheus"), ReadOnly: pulumi.Bool(true)},
							corev1.VolumeMountArgs{Name: pulumi.String("data"), MountPath: pulumi.String("/prometheus")},
						},
					}},
					Volumes: corev1.VolumeArray{
						corev1.VolumeArgs{Name: pulumi.String("config"), ConfigMap: &corev1.ConfigMapVolumeSourceArgs{Name: pulumi.String(PrometheusName)}},
						corev1.VolumeArgs{Name: pulumi.String("data"), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{SizeLimit: pulumi.String(a.StorageSize)}},
					},
				},
			},
		},
	}
}

// RenderPrometheusService exposes Prometheus (and Grafana's data source points at it).
func RenderPrometheusService(a *Args) *corev1.ServiceArgs {
	return service(a, PrometheusName, "web", PrometheusPort)
}

// NodeMetricsService is the Service through which a pod reads the DCGM exporter of its own node.
const NodeMetricsService = DCGMName + "-node"

// NodeGPUMetricsURL is the URL of the node-local exporter Service for a pod of the stack
// (sentinels.watchGPUs), in the agents' namespace agentsNS.
func NodeGPUMetricsURL(agentsNS string) string {
	return fmt.Sprintf("http://%s.%s.svc:%d/metrics", NodeMetricsService, agentsNS, DCGMPort)
}

// RenderNodeMetricsService is the DCGM exporter's node-local Service: internalTrafficPolicy
// Local sends a pod's connection only to the exporter on the pod's own node, so that what a
// sentinel reads is its node's GPUs and no other's; on a node without the exporter (a CPU node)
// the connection fails rather than being answered by another node's. Kubernetes' ServiceSpec:
// with internalTrafficPolicy "Local", "the proxy will assume that pods only want to talk to
// endpoints of the service on the same node as the pod, dropping the traffic if there are no
// local endpoints" (https://kubernetes.io/docs/concepts/services-networking/service-traffic-policy/).
func RenderNodeMetricsService(a *Args) *corev1.ServiceArgs {
	return &corev1.ServiceArgs{
		Metadata: a.Labels.ServiceMeta(NodeMetricsService, agentsNamespace(a), DCGMName),
		Spec: &corev1.ServiceSpecArgs{
			Selector:              pulumi.ToStringMap(a.Labels.Selector(DCGMName)),
			InternalTrafficPolicy: pulumi.String("Local"),
			Ports: corev1.ServicePortArray{corev1.ServicePortArgs{
				Name: pulumi.String("metrics"), Port: pulumi.Int(DCGMPort), TargetPort: pulumi.Int(DCGMPort),
			}},
		},
	}
}

// RenderDCGMExporter builds the DCGM exporter DaemonSet: on GPU nodes only (selected by the
// nvidia.com/gpu.present label every GPU pool carries), tolerating their taint, reading which pod
// holds which GPU from the kubelet's pod-resources socket. It requests no GPU: it watches them
// all through the driver.
func RenderDCGMExporter(a *Args) *appsv1.DaemonSetArgs {
	env, mounts, volumes := dcgmDriver(a.GPUNodes)
	return &appsv1.DaemonSetArgs{
		Metadata: a.Labels.ObjectMeta(DCGMName, agentsNamespace(a), DCGMName),
		Spec: &appsv1.DaemonSetSpecArgs{
			Selector:       &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(DCGMName))},
			UpdateStrategy: &appsv1.DaemonSetUpdateStrategyArgs{Type: pulumi.String("RollingUpdate")},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(DCGMName))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.PodSecurity(0),
					NodeSelector:                 a.Labels.GPUNodeSelector(),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					Tolerations:                  corev1.TolerationArray{meta.GPUToleration()},
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String(DCGMName),
						Image: pulumi.String(a.DCGMImage),
						Env:   env,
						Ports: corev1.ContainerPortArray{corev1.ContainerPortArgs{Name: pulumi.String("metrics"), ContainerPort: pulumi.Int(DCGMPort)}},
						ReadinessProbe: &corev1.ProbeArgs{
							HttpGet:       &corev1.HTTPGetActionArgs{Path: pulumi.String("/health"), Port: pulumi.Int(DCGMPort)},
							PeriodSeconds: pulumi.Int(10),
						},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("100m"), "memory": pulumi.String("256Mi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("1"), "memory": pulumi.String("1Gi")},
						},
						SecurityContext: dcgmSecurity(a.GPUNodes),
						VolumeMounts:    mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

func service(a *Args, name, portName string, port int) *corev1.ServiceArgs {
	return &corev1.ServiceArgs{
		Metadata: a.Labels.ServiceMeta(name, a.Namespace, name),
		Spec: &corev1.ServiceSpecArgs{
			Selector: pulumi.ToStringMap(a.Labels.Selector(name)),
			Ports: corev1.ServicePortArray{corev1.ServicePortArgs{
				Name: pulumi.String(portName), Port: pulumi.Int(port), TargetPort: pulumi.Int(port),
			}},
		},
	}
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
