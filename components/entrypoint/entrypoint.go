// Package entrypoint runs the scheduler node: dask-scheduler (with the Dask dashboard),
// Jupyter (JupyterLab, or the classic Notebook) and TensorBoard in one Deployment behind one
// Service, and computes the URLs and the `kubectl port-forward` arguments that reach them.
package entrypoint

import (
	"errors"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/meta"
)

// Ports of the entrypoint's services.
const (
	SchedulerPort   = 8786
	DashboardPort   = 8787
	JupyterPort     = 8888
	TensorBoardPort = 6006
)

// Name is the entrypoint's object name in a stack (Args.Name): its Deployment, Service and Secret
// prefix; its component label is the same word.
const Name = "entrypoint"

const component = Name

// Jupyter front ends (Args.JupyterUI).
const (
	// UILab is JupyterLab on jupyter_server, started by the Jupyter docker stacks'
	// start-notebook.py; users land on /lab.
	UILab = "lab"
	// UINotebook is the classic Notebook 6 (`jupyter notebook`), e.g. Debian's, which packages no
	// JupyterLab; users land on /tree.
	UINotebook = "notebook"
)

// Component is the entrypoint's component label, for the NetworkPolicies that select its pod.
const Component = component

// Args are the entrypoint's inputs: its section (kolotoc:entrypoint, defaulted and validated),
// the site the stack gives every workload (the pod mounts the shared claim, not the scratch
// space; Jupyter runs as its RunAsUser, the user of the notebooks that write the shared claim, 0
// keeping the image's user, jovyan in the Jupyter images, while the scheduler and TensorBoard run
// as NonRootUser whatever it is), and what the stack adds. The CPU limits are
// schedulerCPULimit, jupyterCPULimit and tensorBoardCPULimit, or the request when it is larger.
type Args struct {
	Config
	meta.Site
	Name string // Deployment, Service and Secret prefix
	// TLSKey (secret, PEM) with the section's tlsCertificate makes Jupyter serve HTTPS; required
	// with a LoadBalancer.
	TLSKey          pulumi.StringInput
	JupyterPassword pulumi.StringInput // secret; becomes JupyterLab's login token
	// LoadBalancer is the load balancer the cluster puts in front of a LoadBalancer Service
	// (LoadBalancerPassthrough or LoadBalancerAWSInTree): the stack knows the cloud, the
	// entrypoint what that load balancer must be told; default LoadBalancerPassthrough.
	LoadBalancer string
}

// Load balancers in front of the public Service (Args.LoadBalancer). The NetworkPolicy
// jupyter-public admits the source ranges only, so Jupyter's pod must see each client's own
// address: a load balancer that proxies the connection, or a node that SNATs it, leaves every
// user refused.
const (
	// LoadBalancerPassthrough passes the client's packets through to the nodes: GKE's external
	// passthrough Network Load Balancer ("Local [...] so that traffic received by the local Pod
	// sees the original source IP address": GKE, LoadBalancer Service parameters) and AKS's
	// Standard Load Balancer ("To maintain the client's IP address, you must set
	// service.spec.externalTrafficPolicy to Local": AKS, Use a public standard load balancer).
	// externalTrafficPolicy Local alone keeps the address.
	LoadBalancerPassthrough = ""
	// LoadBalancerAWSInTree is EKS's in-tree service controller (Kolotoc installs no AWS Load
	// Balancer Controller). Left alone it makes a Classic ELB, which proxies TCP: the pod sees the
	// ELB's or a node's address. Told nlb it makes a Network Load Balancer with instance targets:
	// "Unlike Classic Elastic Load Balancers, Network Load Balancers (NLBs) forward the client's
	// IP address through to the node [...] By setting .spec.externalTrafficPolicy to Local, the
	// client IP addresses is propagated to the end Pods" (kubernetes.io, Service, Network Load
	// Balancer support on AWS); it keeps loadBalancerSourceRanges as node security group rules.
	LoadBalancerAWSInTree = "aws-in-tree"
)

// AWSLoadBalancerTypeAnnotation asks the in-tree AWS service controller for a Network Load
// Balancer (value "nlb") instead of a Classic ELB.
const AWSLoadBalancerTypeAnnotation = "service.beta.kubernetes.io/aws-load-balancer-type"

// Entrypoint is the scheduler node.
type Entrypoint struct {
	pulumi.ResourceState
	Deployment    *appsv1.Deployment
	Service       *corev1.Service // ClusterIP, every port: what the pods and port-forwards use
	PublicService *corev1.Service // the LoadBalancer (Jupyter over HTTPS), or nil
}

// TLS says whether Jupyter serves HTTPS.
func (a *Args) TLS() bool { return a.TLSCertificate != "" }

// PublicName is the LoadBalancer Service's name.
func PublicName(name string) string { return name + "-public" }

// PublicAddress is the address the cloud gave the LoadBalancer Service (the first ingress point's
// IP, or its hostname where the cloud's load balancers are DNS-based, as on AWS); "" while it has
// none. The provider waits for it before it reports the Service created.
func PublicAddress(svc *corev1.Service) pulumi.StringOutput {
	return svc.Status.LoadBalancer().Ingress().ApplyT(func(ingress []corev1.LoadBalancerIngress) string {
		for _, in := range ingress {
			if in.Ip != nil && *in.Ip != "" {
				return *in.Ip
			}
			if in.Hostname != nil && *in.Hostname != "" {
				return *in.Hostname
			}
		}
		return ""
	}).(pulumi.StringOutput)
}

// PublicPort is the LoadBalancer's port, forwarded to Jupyter.
const PublicPort = 443

// tlsDir is where Jupyter reads its certificate and key.
const tlsDir = "/etc/kolotoc/tls"

// New registers the entrypoint.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Entrypoint, error) {
	if args == nil {
		return nil, errors.New("entrypoint: args are required")
	}
	if args.Jupyter && args.JupyterPassword == nil {
		return nil, fmt.Errorf("entrypoint %q: JupyterLab needs a password; there is no default", name)
	}
	e := &Entrypoint{}
	if err := ctx.RegisterComponentResource("kolotoc:entrypoint:Entrypoint", name, e, opts...); err != nil {
		return nil, fmt.Errorf("entrypoint %q: %w", name, err)
	}
	if args.ServiceType == ServiceLoadBalancer && (!args.Jupyter || !args.TLS()) {
		return nil, fmt.Errorf("entrypoint %q: a LoadBalancer publishes Jupyter over HTTPS only: Jupyter and a TLS certificate are required", name)
	}
	if args.TLS() && args.TLSKey == nil {
		return nil, fmt.Errorf("entrypoint %q: a TLS certificate without its key", name)
	}
	deps := []pulumi.Resource{}
	if args.Jupyter {
		s, err := corev1.NewSecret(ctx, name+"-jupyter", RenderSecret(args), pulumi.Parent(e))
		if err != nil {
			return nil, fmt.Errorf("entrypoint %q: Secret %q: %w", name, name+"-jupyter", err)
		}
		deps = append(deps, s)
	}
	if args.Jupyter && args.TLS() {
		s, err := corev1.NewSecret(ctx, name+"-tls", RenderTLSSecret(args), pulumi.Parent(e))
		if err != nil {
			return nil, fmt.Errorf("entrypoint %q: Secret %q: %w", name, name+"-tls", err)
		}
		deps = append(deps, s)
	}
	var err error
	e.Deployment, err = appsv1.NewDeployment(ctx, name, RenderDeployment(args), pulumi.Parent(e), pulumi.DependsOn(append(deps, args.PodDeps...)))
	if err != nil {
		return nil, fmt.Errorf("entrypoint %q: Deployment %q: %w", name, name, err)
	}
	e.Service, err = corev1.NewService(ctx, name, RenderService(args), pulumi.Parent(e))
	if err != nil {
		return nil, fmt.Errorf("entrypoint %q: Service %q: %w", name, name, err)
	}
	if pub := RenderPublicService(args); pub != nil {
		if e.PublicService, err = corev1.NewService(ctx, name+"-public", pub, pulumi.Parent(e)); err != nil {
			return nil, fmt.Errorf("entrypoint %q: Service %q: %w", name, name+"-public", err)
		}
	}
	return e, meta.RegisterOutputs(ctx, e, pulumi.Map{"service": e.Service.Metadata.Name()})
}

// SchedulerAddress is the address every Dask worker connects to.
func SchedulerAddress(name, namespace string) string {
	return fmt.Sprintf("tcp://%s.%s.svc:%d", name, namespace, SchedulerPort)
}

// Endpoints lists the enabled services by output name (jupyter, tensorboard, daskDashboard).
func Endpoints(a *Args) map[string]meta.Endpoint {
	out := map[string]meta.Endpoint{}
	add := func(key, scheme string, port int, path string) {
		out[key] = meta.ServiceEndpoint(scheme, a.Name, a.NamespaceDNS, port, path)
	}
	if a.Jupyter {
		scheme := "http"
		if a.TLS() {
			scheme = "https"
		}
		add("jupyter", scheme, JupyterPort, JupyterPath(a))
	}
	if a.TensorBoard {
		add("tensorboard", "http", TensorBoardPort, "/")
	}
	if a.DaskDashboard {
		add("daskDashboard", "http", DashboardPort, "/status")
	}
	add("daskScheduler", "tcp", SchedulerPort, "")
	return out
}

// JupyterSecretName and TLSSecretName name the Secrets of the entrypoint called name: Jupyter's
// token, and its certificate and key.
func JupyterSecretName(name string) string { return name + "-jupyter" }
func TLSSecretName(name string) string     { return name + "-tls" }

// RenderTLSSecret holds Jupyter's certificate and key; a secret in state because the key is.
func RenderTLSSecret(a *Args) *corev1.SecretArgs {
	return &corev1.SecretArgs{
		Metadata: a.Labels.ObjectMeta(TLSSecretName(a.Name), a.Namespace, component),
		Type:     pulumi.String("kubernetes.io/tls"),
		StringData: pulumi.StringMap{
			"tls.crt": pulumi.String(a.TLSCertificate),
			"tls.key": pulumi.ToSecret(a.TLSKey.ToStringOutput()).(pulumi.StringOutput),
		},
	}
}

// RenderSecret holds JupyterLab's token; it is a secret in state because the password is.
func RenderSecret(a *Args) *corev1.SecretArgs {
	return &corev1.SecretArgs{
		Metadata: a.Labels.ObjectMeta(JupyterSecretName(a.Name), a.Namespace, component),
		Type:     pulumi.String("Opaque"),
		StringData: pulumi.StringMap{
			"token": pulumi.ToSecret(a.JupyterPassword.ToStringOutput()).(pulumi.StringOutput),
		},
	}
}

func port(name string, p int) corev1.ContainerPortArray {
	return corev1.ContainerPortArray{corev1.ContainerPortArgs{Name: pulumi.String(name), ContainerPort: pulumi.Int(p)}}
}

// CPU limits of the containers (cores), unless the request is larger: room for bursts (a
// notebook's kernels, the scheduler's graph building) without one container starving the pod.
const (
	schedulerCPULimit   = "2"
	jupyterCPULimit     = "4"
	tensorBoardCPULimit = "2"
)

func resources(cpu, memory, cpuLimit string) *corev1.ResourceRequirementsArgs {
	if l, errL := resource.ParseQuantity(cpuLimit); errL == nil {
		if q, err := resource.ParseQuantity(cpu); err == nil && q.Cmp(l) > 0 {
			cpuLimit = cpu
		}
	}
	return &corev1.ResourceRequirementsArgs{
		Requests: pulumi.StringMap{"cpu": pulumi.String(cpu), "memory": pulumi.String(memory)},
		Limits:   pulumi.StringMap{"cpu": pulumi.String(cpuLimit), "memory": pulumi.String(memory)},
	}
}

// JupyterPath is where users land: /tree in the classic Notebook, /lab in JupyterLab.
func JupyterPath(a *Args) string {
	if a.JupyterUI == UINotebook {
		return "/tree"
	}
	return "/lab"
}

// SchedulerContainer is the entrypoint's dask-scheduler container, the one gotoEntrypoint enters.
const SchedulerContainer = "dask-scheduler"

// jupyterContainer runs Jupyter on JupyterPort with the shared claim as its root directory. Both
// front ends read their login token from JUPYTER_TOKEN, set from the Secret; the value never
// appears in the pod spec, only the Secret's name.
func jupyterContainer(a *Args, shared corev1.VolumeMountArray) corev1.ContainerArgs {
	name, args := "jupyterlab", pulumi.StringArray{
		pulumi.String("start-notebook.py"),
		pulumi.String(fmt.Sprintf("--ServerApp.port=%d", JupyterPort)),
		pulumi.String("--ServerApp.ip=0.0.0.0"),
		pulumi.String("--ServerApp.root_dir=" + a.MountPath),
	}
	if a.JupyterUI == UINotebook {
		// The classic Notebook server (Notebook 6): its NotebookApp options; as root in the
		// container (runAsUser 0 in an image whose user is root) it needs --allow-root, which
		// it ignores as another user.
		name, args = "jupyter", pulumi.StringArray{
			pulumi.String("jupyter"), pulumi.String("notebook"),
			pulumi.String("--no-browser"),
		}
		if a.RunAsUser == 0 {
			args = append(args, pulumi.String("--allow-root"))
		}
		args = append(args,
			pulumi.String("--NotebookApp.ip=0.0.0.0"),
			pulumi.String(fmt.Sprintf("--NotebookApp.port=%d", JupyterPort)),
			pulumi.String("--NotebookApp.notebook_dir="+a.MountPath),
		)
	}
	var probeScheme pulumi.StringPtrInput // HTTP, the API server's default
	mounts := shared
	if a.TLS() {
		opt := "ServerApp"
		if a.JupyterUI == UINotebook {
			opt = "NotebookApp"
		}
		args = append(args,
			pulumi.String(fmt.Sprintf("--%s.certfile=%s/tls.crt", opt, tlsDir)),
			pulumi.String(fmt.Sprintf("--%s.keyfile=%s/tls.key", opt, tlsDir)))
		probeScheme = pulumi.String("HTTPS")
		mounts = append(append(corev1.VolumeMountArray{}, shared...), corev1.VolumeMountArgs{
			Name: pulumi.String("tls"), MountPath: pulumi.String(tlsDir), ReadOnly: pulumi.Bool(true),
		})
	}
	return corev1.ContainerArgs{
		Name:  pulumi.String(name),
		Image: pulumi.String(a.JupyterImage),
		Args:  args,
		Env: append(corev1.EnvVarArray{
			corev1.EnvVarArgs{Name: pulumi.String("JUPYTER_TOKEN"), ValueFrom: &corev1.EnvVarSourceArgs{
				SecretKeyRef: &corev1.SecretKeySelectorArgs{Name: pulumi.String(JupyterSecretName(a.Name)), Key: pulumi.String("token")},
			}},
			corev1.EnvVarArgs{Name: pulumi.String("DASK_SCHEDULER_ADDRESS"), Value: pulumi.String(SchedulerAddress(a.Name, a.NamespaceDNS))},
		}, meta.EnvArray(a.Env)...),
		Ports: port("jupyter", JupyterPort),
		// /api answers without a login in both front ends.
		ReadinessProbe: readiness(corev1.ProbeArgs{HttpGet: &corev1.HTTPGetActionArgs{
			Path: pulumi.String("/api"), Port: pulumi.Int(JupyterPort), Scheme: probeScheme,
		}}),
		Resources:       resources(a.JupyterCPU, a.JupyterMemory, jupyterCPULimit),
		SecurityContext: meta.LockedDown(),
		VolumeMounts:    mounts,
	}
}

// ProbePeriod and ProbeFailures time the entrypoint's readiness probes: one every 2 s, and a
// container is unready after 30 s of failures, as with the Kubernetes defaults (every 10 s, 3
// failures). The kubelet probes a starting container once, mostly before its server listens,
// then once a period: with 10 s, the probe after the one missed made every `pulumi up`, which
// waits for the entrypoint's Deployment, up to 10 s longer (docs/measured.md); with 2 s, up to 2 s.
const (
	ProbePeriod   = 2
	ProbeFailures = 15
)

// readiness is a readiness probe of the entrypoint's: handler, at ProbePeriod and ProbeFailures.
func readiness(handler corev1.ProbeArgs) *corev1.ProbeArgs {
	handler.PeriodSeconds, handler.FailureThreshold = pulumi.Int(ProbePeriod), pulumi.Int(ProbeFailures)
	return &handler
}

// NonRootUser is the user the scheduler and TensorBoard run as (nobody): neither writes the
// shared claim (TensorBoard only reads its logs), so neither needs root. Jupyter runs as
// Args.RunAsUser, the user every workload writes the shared claim as.
const NonRootUser = 65534

// RenderDeployment builds the scheduler node's pod.
func RenderDeployment(a *Args) *appsv1.DeploymentArgs {
	shared := corev1.VolumeMountArray{meta.Mount("shared", a.MountPath)}
	containers := corev1.ContainerArray{corev1.ContainerArgs{
		Name:  pulumi.String(SchedulerContainer),
		Image: pulumi.String(a.DaskImage),
		Args: pulumi.StringArray{
			pulumi.String("dask"), pulumi.String("scheduler"),
			pulumi.String("--port"), pulumi.String(fmt.Sprint(SchedulerPort)),
			pulumi.String("--dashboard-address"), pulumi.String(fmt.Sprintf(":%d", DashboardPort)),
		},
		Ports: append(port("scheduler", SchedulerPort), corev1.ContainerPortArgs{
			Name: pulumi.String("dashboard"), ContainerPort: pulumi.Int(DashboardPort),
		}),
		ReadinessProbe:  readiness(corev1.ProbeArgs{TcpSocket: &corev1.TCPSocketActionArgs{Port: pulumi.Int(SchedulerPort)}}),
		Resources:       resources(a.SchedulerCPU, a.SchedulerMemory, schedulerCPULimit),
		SecurityContext: meta.LockedDownAs(NonRootUser),
	}}
	if a.Jupyter {
		containers = append(containers, jupyterContainer(a, shared))
	}
	if a.TensorBoard {
		containers = append(containers, corev1.ContainerArgs{
			Name:  pulumi.String("tensorboard"),
			Image: pulumi.String(a.TensorBoardImage),
			Command: pulumi.StringArray{
				pulumi.String("tensorboard"),
				pulumi.String("--logdir=" + a.MountPath + "/logs"),
				pulumi.String("--bind_all"),
				pulumi.String(fmt.Sprintf("--port=%d", TensorBoardPort)),
			},
			Ports:           port("tensorboard", TensorBoardPort),
			ReadinessProbe:  readiness(corev1.ProbeArgs{TcpSocket: &corev1.TCPSocketActionArgs{Port: pulumi.Int(TensorBoardPort)}}),
			Resources:       resources(a.TensorBoardCPU, a.TensorBoardMemory, tensorBoardCPULimit),
			SecurityContext: meta.LockedDownAs(NonRootUser),
			VolumeMounts:    shared,
		})
	}
	volumes := corev1.VolumeArray{meta.ClaimVolume("shared", a.Claim)}
	if a.Jupyter && a.TLS() {
		// 0444: the Jupyter images run as their own user (jovyan), not root; the pod has no other.
		volumes = append(volumes, corev1.VolumeArgs{Name: pulumi.String("tls"), Secret: &corev1.SecretVolumeSourceArgs{
			SecretName: pulumi.String(TLSSecretName(a.Name)), DefaultMode: pulumi.Int(0o444),
		}})
	}
	return &appsv1.DeploymentArgs{
		Metadata: a.Labels.ObjectMeta(a.Name, a.Namespace, component),
		Spec: &appsv1.DeploymentSpecArgs{
			Replicas: pulumi.Int(1),
			// One scheduler at a time: two would split the workers between them.
			Strategy: &appsv1.DeploymentStrategyArgs{Type: pulumi.String("Recreate")},
			Selector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(component))},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(component))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.WorkloadSecurity(a.RunAsUser),
					NodeSelector:                 a.Labels.PoolSelector(a.Pool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers:                   containers,
					Volumes:                      volumes,
				},
			},
		},
	}
}

// RenderService exposes the enabled ports inside the cluster (ClusterIP): the workers reach the
// scheduler through it, users through `kubectl port-forward`.
func RenderService(a *Args) *corev1.ServiceArgs {
	ports := corev1.ServicePortArray{svcPort("scheduler", SchedulerPort)}
	if a.DaskDashboard {
		ports = append(ports, svcPort("dashboard", DashboardPort))
	}
	if a.Jupyter {
		ports = append(ports, svcPort("jupyter", JupyterPort))
	}
	if a.TensorBoard {
		ports = append(ports, svcPort("tensorboard", TensorBoardPort))
	}
	spec := &corev1.ServiceSpecArgs{
		Type:     pulumi.String("ClusterIP"),
		Selector: pulumi.ToStringMap(a.Labels.Selector(component)),
		Ports:    ports,
	}
	return &corev1.ServiceArgs{Metadata: a.Labels.ServiceMeta(a.Name, a.Namespace, component), Spec: spec}
}

// RenderPublicService is the LoadBalancer, or nil: Jupyter alone, over HTTPS on PublicPort, from
// the source ranges. The Dask scheduler runs code on every worker for whoever reaches it without
// authentication, and TensorBoard and the dashboard have no login: none of them is published.
func RenderPublicService(a *Args) *corev1.ServiceArgs {
	if a.ServiceType != ServiceLoadBalancer {
		return nil
	}
	md := a.Labels.ObjectMeta(PublicName(a.Name), a.Namespace, component)
	if a.LoadBalancer == LoadBalancerAWSInTree {
		md.Annotations.(pulumi.StringMap)[AWSLoadBalancerTypeAnnotation] = pulumi.String("nlb")
	}
	return &corev1.ServiceArgs{
		Metadata: md,
		Spec: &corev1.ServiceSpecArgs{
			Type:     pulumi.String(ServiceLoadBalancer),
			Selector: pulumi.ToStringMap(a.Labels.Selector(component)),
			Ports: corev1.ServicePortArray{corev1.ServicePortArgs{
				Name: pulumi.String("jupyter-https"), Port: pulumi.Int(PublicPort), TargetPort: pulumi.Int(JupyterPort),
			}},
			LoadBalancerSourceRanges: pulumi.ToStringArray(a.SourceRanges),
			// Keep the client's address: the NetworkPolicy admits the source ranges, which it
			// could not tell apart from the nodes if the traffic arrived SNATed to a node's address
			// (and on AWS, only behind a Network Load Balancer: LoadBalancerAWSInTree).
			ExternalTrafficPolicy: pulumi.String("Local"),
		},
	}
}

func svcPort(name string, p int) corev1.ServicePortArgs {
	return corev1.ServicePortArgs{Name: pulumi.String(name), Port: pulumi.Int(p), TargetPort: pulumi.Int(p)}
}
