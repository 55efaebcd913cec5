// Package dask runs the Dask workers: "carriers", a StatefulSet of dask-worker pods on a CPU pool
// with one worker process per logical core, and "sentinels", a small dask-worker beside each tower
// (rendered here, run by the ring as a sidecar). Every worker points at the entrypoint's scheduler.
package dask

import (
	"errors"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// CarrierName is the carriers' object name in a stack (CarrierArgs.Name): their StatefulSet and
// headless Service, pods carrier-0 …; their component label is the same word.
const CarrierName = "carrier"

const carrierComponent = CarrierName

// CarrierComponent is the carriers' component label, for the NetworkPolicies that select them.
const CarrierComponent = carrierComponent

// dashboardPortName names process i's dashboard port: dask-dash, then dask-dash-1, dask-dash-2, …
// (what Prometheus's dask job keeps).
func dashboardPortName(i int) string {
	if i == 0 {
		return "dask-dash"
	}
	return fmt.Sprintf("dask-dash-%d", i)
}

// dashboardPreload is a nanny preload that gives process i its own dashboard port. dask-worker
// passes one --dashboard-address to every process of --nworkers; all but the first find the port
// taken and serve their dashboard and metrics on a random port instead, which nothing declares
// and nothing scrapes. Each nanny listens on NannyPortFirst+i and starts its worker after the
// preload, with the worker arguments it holds: the preload sets the address there.
var dashboardPreload = fmt.Sprintf(`def dask_setup(nanny):
    # Kolotoc: worker process i (nanny port %d+i) serves its dashboard and metrics on %d+i.
    nanny.worker_kwargs["dashboard_address"] = ":%%d" %% (%d + nanny.port - %d)
`, NannyPortFirst, DashboardPortFirst, DashboardPortFirst, NannyPortFirst)

// Ports of a pod's worker processes, their nannies and their dashboards. Dask picks random ones
// by default; fixed ranges let a NetworkPolicy admit the scheduler and the other workers (or
// Prometheus) on them and nothing else: process i of a pod listens on WorkerPortFirst+i, its
// nanny on NannyPortFirst+i, its dashboard and metrics on DashboardPortFirst+i (the container
// port named dashboardPortName(i)).
const (
	WorkerPortFirst    = 40000
	NannyPortFirst     = 41000
	DashboardPortFirst = 42000
	// MaxProcesses is the most worker processes one pod may run: the size of each range.
	MaxProcesses = 1000
)

// portRange is dask's <first>:<last> form of a range of n ports, or the one port when n is 1:
// dask refuses a range whose last port is not above its first ("port_stop must be greater than
// port_start"), so "40000:40000" would stop a one-process worker from starting.
func portRange(first, n int) string {
	if n <= 1 {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d:%d", first, first+n-1)
}

// CarrierArgs are the carriers' inputs: their section (kolotoc:carriers, defaulted and
// validated), the site the stack gives every workload, and what the stack derives.
type CarrierArgs struct {
	CarriersConfig
	meta.Site
	Name      string // StatefulSet and headless Service name; pods are <Name>-<i>
	Scheduler string // tcp://host:8786
}

// Carriers is the carrier StatefulSet.
type Carriers struct {
	pulumi.ResourceState
	StatefulSet *appsv1.StatefulSet
}

// NewCarriers registers the carriers.
func NewCarriers(ctx *pulumi.Context, name string, args *CarrierArgs, opts ...pulumi.ResourceOption) (*Carriers, error) {
	if args == nil {
		return nil, errors.New("dask: args are required")
	}
	c := &Carriers{}
	if err := ctx.RegisterComponentResource("kolotoc:dask:Carriers", name, c, opts...); err != nil {
		return nil, fmt.Errorf("dask %q: %w", name, err)
	}
	svc, err := corev1.NewService(ctx, name, RenderCarrierService(args), pulumi.Parent(c))
	if err != nil {
		return nil, fmt.Errorf("dask %q: Service %q: %w", name, name, err)
	}
	c.StatefulSet, err = appsv1.NewStatefulSet(ctx, name, RenderCarriers(args), pulumi.Parent(c),
		pulumi.DependsOn(append([]pulumi.Resource{svc}, args.PodDeps...)))
	if err != nil {
		return nil, fmt.Errorf("dask %q: StatefulSet %q: %w", name, name, err)
	}
	return c, meta.RegisterOutputs(ctx, c, pulumi.Map{"name": c.StatefulSet.Metadata.Name()})
}

// RenderCarrierService is the carriers' headless Service (stable pod names for `kubectl exec`).
func RenderCarrierService(a *CarrierArgs) *corev1.ServiceArgs {
	return a.Labels.HeadlessService(a.Name, a.Namespace, carrierComponent, false, meta.Port{Name: "dashboard", Port: DashboardPortFirst})
}

// RenderCarriers builds the carrier StatefulSet: `Workers` single-threaded worker processes per pod.
func RenderCarriers(a *CarrierArgs) *appsv1.StatefulSetArgs {
	return &appsv1.StatefulSetArgs{
		Metadata: a.Labels.ObjectMeta(a.Name, a.Namespace, carrierComponent),
		Spec: &appsv1.StatefulSetSpecArgs{
			Replicas:            pulumi.Int(a.Count),
			ServiceName:         pulumi.String(a.Name),
			PodManagementPolicy: pulumi.String("Parallel"),
			Selector:            &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(carrierComponent))},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(carrierComponent))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.WorkloadSecurity(a.RunAsUser),
					NodeSelector:                 a.Labels.PoolSelector(a.Pool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					InitContainers:               a.Code.InitContainers(),
					Containers: corev1.ContainerArray{Worker(WorkerArgs{
						Name: carrierContainer, Image: a.Image, Scheduler: a.Scheduler,
						Processes: a.WorkersPerCarrier, Threads: 1, CPU: a.CPU, Memory: a.Memory,
						Mounts: a.SharedMounts(), LocalDir: a.Scratch.MountPath, Env: a.Env, Code: a.Code,
					})},
					Volumes: append(a.SharedVolumes(), volumes(a.Code)...),
				},
			},
		},
	}
}

// WorkerArgs describe one dask-worker container.
type WorkerArgs struct {
	Name      string // container name
	Image     string
	Scheduler string // scheduler address
	Processes int    // worker processes (--nworkers)
	Threads   int    // threads per process (--nthreads)
	CPU       string // CPU request (quantity)
	Memory    string // memory request and limit (quantity), split among the processes
	Mounts    corev1.VolumeMountArray
	LocalDir  string            // spill directory
	Env       []meta.EnvSetting // the stack's variables
	Code      *meta.Code        // the checkout to mount (the pod clones it); nil for none
}

// volumes are the code's volumes as a VolumeArray.
func volumes(c *meta.Code) corev1.VolumeArray {
	var out corev1.VolumeArray
	return append(out, c.Volumes()...)
}

// Worker renders a dask-worker container. The worker name is the pod name, so the dashboard shows
// which carrier or tower a worker runs on.
func Worker(w WorkerArgs) corev1.ContainerArgs {
	args := pulumi.StringArray{
		pulumi.String("dask"), pulumi.String("worker"), pulumi.String(w.Scheduler),
		pulumi.String("--name"), pulumi.String("$(POD_NAME)"),
		pulumi.String("--nworkers"), pulumi.String(fmt.Sprint(w.Processes)),
		pulumi.String("--nthreads"), pulumi.String(fmt.Sprint(w.Threads)),
		pulumi.String("--memory-limit"), pulumi.String("auto"),
		pulumi.String("--dashboard-address"), pulumi.String(fmt.Sprintf(":%d", DashboardPortFirst)),
		pulumi.String("--worker-port"), pulumi.String(portRange(WorkerPortFirst, w.Processes)),
		pulumi.String("--nanny-port"), pulumi.String(portRange(NannyPortFirst, w.Processes)),
		pulumi.String("--local-directory"), pulumi.String(w.LocalDir),
	}
	ports := corev1.ContainerPortArray{}
	for i := range max(w.Processes, 1) {
		ports = append(ports, corev1.ContainerPortArgs{Name: pulumi.String(dashboardPortName(i)), ContainerPort: pulumi.Int(DashboardPortFirst + i)})
	}
	if w.Processes > 1 {
		args = append(args, pulumi.String("--preload-nanny"), pulumi.String(dashboardPreload))
	}
	return corev1.ContainerArgs{
		Name:  pulumi.String(w.Name),
		Image: pulumi.String(w.Image),
		Args:  args,
		Env:   workerEnv(w),
		Ports: ports,
		Resources: &corev1.ResourceRequirementsArgs{
			Requests: pulumi.StringMap{"cpu": pulumi.String(w.CPU), "memory": pulumi.String(w.Memory)},
			// Each process runs Threads threads: together they use at most Processes × Threads cores.
			Limits: pulumi.StringMap{"cpu": pulumi.String(fmt.Sprint(max(w.Processes*w.Threads, 1))), "memory": pulumi.String(w.Memory)},
		},
		SecurityContext: meta.LockedDown(),
		VolumeMounts:    workerMounts(w),
	}
}

// workerEnv is the worker's own POD_NAME, where the code is, then the stack's variables.
func workerEnv(w WorkerArgs) corev1.EnvVarArray {
	env := corev1.EnvVarArray{corev1.EnvVarArgs{
		Name:      pulumi.String("POD_NAME"),
		ValueFrom: &corev1.EnvVarSourceArgs{FieldRef: &corev1.ObjectFieldSelectorArgs{FieldPath: pulumi.String("metadata.name")}},
	}}
	env = append(env, w.Code.Env()...)
	return append(env, meta.EnvArray(w.Env)...)
}

func workerMounts(w WorkerArgs) corev1.VolumeMountArray {
	mounts := append(corev1.VolumeMountArray{}, w.Mounts...)
	mounts = append(mounts, w.Code.Mounts()...)
	return mounts
}

// NodeGPUMetricsEnv is the variable that tells a sentinel watching GPUs where its node's GPU
// metrics are (sentinels.watchGPUs).
const NodeGPUMetricsEnv = "KOLOTOC_NODE_GPU_METRICS"

// Sentinel renders the dask-worker that runs beside each tower: one process of s.Threads threads,
// requesting s.CPU and s.Memory, in the carriers' image with the carriers' environment, mounting
// the site's shared claim and scratch (the tower pod clones the site's code). gpuMetrics is the
// URL of its node's GPU metrics when it watches GPUs (NodeGPUMetricsEnv), else "".
func Sentinel(s SentinelsConfig, carriers CarriersConfig, scheduler string, site meta.Site, gpuMetrics string) corev1.ContainerArgs {
	env := carriers.Env
	if gpuMetrics != "" {
		env = append(append([]meta.EnvSetting{}, env...), meta.EnvSetting{Name: NodeGPUMetricsEnv, Value: gpuMetrics})
	}
	return Worker(WorkerArgs{
		Name: "sentinel", Image: carriers.Image, Scheduler: scheduler, Processes: 1, Threads: s.Threads,
		CPU: s.CPU, Memory: s.Memory, Mounts: site.SharedMounts(), LocalDir: site.Scratch.MountPath,
		Env: env, Code: site.Code,
	})
}
