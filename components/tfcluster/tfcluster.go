// Package tfcluster runs distributed TensorFlow: parameter servers, workers, an optional chief
// and an optional evaluator, one StatefulSet and headless Service per task type, each pod given
// its TF_CONFIG, plus a TensorBoard over the shared log directory when the entrypoint runs none.
//
// TF_CONFIG is assembled in the pod, not in the template: the cluster spec (every task's stable
// DNS name) is the same for all pods of a type and sits in the template as KOLOTOC_TF_CLUSTER;
// the entry script adds the task type and the index, which it reads from the pod's hostname
// ordinal (<type>-<i>). One template serves every index, and the number of registered resources
// does not depend on the number of tasks.
package tfcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/fabric"
	"kolotoc/components/meta"
)

// Task types, as TF_CONFIG names them.
const (
	TypeChief     = "chief"
	TypeWorker    = "worker"
	TypePS        = "ps"
	TypeEvaluator = "evaluator"
)

const (
	// TensorBoardPort is TensorBoard's port, the same as the entrypoint's.
	TensorBoardPort = 6006
	// ClusterEnv holds the cluster spec in every task's template.
	ClusterEnv = "KOLOTOC_TF_CLUSTER"
	// TaskTypeEnv holds the task type in every task's template.
	TaskTypeEnv = "KOLOTOC_TF_TASK_TYPE"
	// scriptsDir is where the entry script and the built-in program are mounted.
	scriptsDir = "/etc/kolotoc/tf"
	// EntryScript and Program are the ConfigMap keys of the entry script and the built-in program.
	EntryScript = "tf_config.sh"
	Program     = "kolotoc_tf.py"
	// ScriptsName is the ConfigMap of the entry script and the built-in program in a stack
	// (Args.ScriptsName).
	ScriptsName = "tf-scripts"
	// TensorBoardName is the cluster's own TensorBoard's Deployment and Service in a stack.
	TensorBoardName = "tf-tensorboard"
	// tensorBoardComponent is the component label of the stack's own TensorBoard.
	tensorBoardComponent = TensorBoardName
)

// NamePrefix + a task type is that type's object name in a stack (Task.Name, TaskName): tf-chief,
// tf-worker, tf-ps, tf-evaluator; its StatefulSet and headless Service, pods tf-worker-0 ….
const NamePrefix = "tf-"

// TaskName is the object name of a task type in a stack.
func TaskName(taskType string) string { return NamePrefix + taskType }

// TensorBoardComponent is the component label of the cluster's own TensorBoard.
const TensorBoardComponent = tensorBoardComponent

// Task is one task type: a StatefulSet and headless Service named Name, pods Name-0 ….
type Task struct {
	Role            // kolotoc:tfcluster.<role>: count, pool, gpus, cpu, memory
	Type     string // chief | worker | ps | evaluator
	Name     string // StatefulSet, Service and component label; e.g. tf-worker
	CPULimit string // CPU limit per task (quantity); default CPU
	// Fabric is what each task takes of its pool's fabric (EFA interfaces, their huge pages,
	// NCCL's environment), as the towers do; zero for none.
	Fabric fabric.Share
}

// TensorBoard is the cluster's own TensorBoard, run when the entrypoint runs none.
type TensorBoard struct {
	Name   string // Deployment and Service name
	Image  string
	Pool   string
	LogDir string // directory it reads: the tasks' LogDir or a parent of it
}

// Args are the TensorFlow cluster's inputs: its section (kolotoc:tfcluster, defaulted and
// validated), the site the stack gives every workload, and what the stack derives.
type Args struct {
	Config
	meta.Site
	ScriptsName    string       // ConfigMap of the entry script and the built-in program
	Tasks          []Task       // every task type, the section's roles with their names; types with Count 0 are left out
	LogDir         string       // TensorBoard log directory (on the claim), KOLOTOC_LOG_DIR
	CheckpointDir  string       // checkpoint directory (on the claim), KOLOTOC_CHECKPOINT_DIR
	EvalDir        string       // evaluation directory (on the claim), KOLOTOC_EVAL_DIR; "" for none
	OwnTensorBoard *TensorBoard // the cluster's own TensorBoard; nil: the entrypoint's reads the shared log directory
	// Gang admits every task of every type as one Kueue pod group (kolotoc:queue); nil: each
	// pod is scheduled as it comes. Its Total is the tasks of all types.
	Gang *meta.Gang
}

// releases reports whether the chief releases the cluster when it succeeds.
func (a *Args) releases() bool { return a.OnSuccess == meta.OnSuccessRelease }

// releaseName is the service account (and role) the chief releases the cluster with.
func releaseName(a *Args) string { return a.ScriptsName + "-release" }

// taskNames are the StatefulSets of the task types that run.
func taskNames(a *Args) []string {
	var names []string
	for _, t := range a.Tasks {
		if t.Count > 0 {
			names = append(names, t.Name)
		}
	}
	return names
}

// TFCluster is the TensorFlow cluster.
type TFCluster struct {
	pulumi.ResourceState
	ClusterSpec pulumi.StringOutput // the cluster spec as JSON, every task's address
}

// New registers the cluster.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*TFCluster, error) {
	if args == nil {
		return nil, errors.New("tfcluster: args are required")
	}
	workers := 0
	for _, t := range args.Tasks {
		if t.Type == TypeWorker {
			workers += t.Count
		}
	}
	if workers < 1 {
		return nil, fmt.Errorf("tfcluster %q: a TensorFlow cluster needs at least one worker", name)
	}
	spec, err := ClusterSpecJSON(args)
	if err != nil {
		return nil, fmt.Errorf("tfcluster %q: %w", name, err)
	}
	c := &TFCluster{}
	if err := ctx.RegisterComponentResource("kolotoc:tfcluster:TFCluster", name, c, opts...); err != nil {
		return nil, fmt.Errorf("tfcluster %q: %w", name, err)
	}
	scripts, err := corev1.NewConfigMap(ctx, name+"-scripts", RenderScripts(args), pulumi.Parent(c))
	if err != nil {
		return nil, fmt.Errorf("tfcluster %q: ConfigMap %q: %w", name, name+"-scripts", err)
	}
	taskDeps := []pulumi.Resource{scripts}
	if args.releases() {
		rel, err := meta.NewReleaser(ctx, releaseName(args), args.Namespace, args.Labels, "tfcluster", taskNames(args), pulumi.Parent(c))
		if err != nil {
			return nil, fmt.Errorf("tfcluster %q: %w", name, err)
		}
		taskDeps = append(taskDeps, rel.Deps...)
	}
	for _, t := range args.Tasks {
		if t.Count == 0 {
			continue
		}
		svc, err := corev1.NewService(ctx, name+"-"+t.Type, RenderService(args, t), pulumi.Parent(c))
		if err != nil {
			return nil, fmt.Errorf("tfcluster %q: Service %q: %w", name, name+"-"+t.Type, err)
		}
		sts, err := RenderStatefulSet(args, t)
		if err != nil {
			return nil, fmt.Errorf("tfcluster %q: %w", name, err)
		}
		// A new pod shape replaces the task type's StatefulSet as a whole (meta.PodShape); a
		// new count changes every task's cluster spec and rolls in place.
		if _, err := appsv1.NewStatefulSet(ctx, name+"-"+t.Type, sts, pulumi.Parent(c), pulumi.DependsOn(append(append([]pulumi.Resource{svc}, taskDeps...), args.PodDeps...)),
			meta.ReplaceOnChangesOf(meta.PodShape)); err != nil {
			return nil, fmt.Errorf("tfcluster %q: StatefulSet %q: %w", name, name+"-"+t.Type, err)
		}
		if pdb := RenderDisruptionBudget(args, t); pdb != nil {
			if _, err := policyv1.NewPodDisruptionBudget(ctx, name+"-"+t.Type, pdb, pulumi.Parent(c)); err != nil {
				return nil, fmt.Errorf("tfcluster %q: PodDisruptionBudget %q: %w", name, name+"-"+t.Type, err)
			}
		}
	}
	if tb := args.OwnTensorBoard; tb != nil {
		if _, err := appsv1.NewDeployment(ctx, name+"-tensorboard", RenderTensorBoard(args), pulumi.Parent(c), pulumi.DependsOn(args.PodDeps)); err != nil {
			return nil, fmt.Errorf("tfcluster %q: Deployment %q: %w", name, name+"-tensorboard", err)
		}
		if _, err := corev1.NewService(ctx, name+"-tensorboard", RenderTensorBoardService(args), pulumi.Parent(c)); err != nil {
			return nil, fmt.Errorf("tfcluster %q: Service %q: %w", name, name+"-tensorboard", err)
		}
	}
	c.ClusterSpec = pulumi.String(spec).ToStringOutput()
	return c, meta.RegisterOutputs(ctx, c, pulumi.Map{"clusterSpec": c.ClusterSpec})
}

// Address is the stable address of task i of t: its pod's name under the headless Service.
func Address(t Task, i int, namespace string, port int) string {
	return fmt.Sprintf("%s-%d.%s.%s.svc:%d", t.Name, i, t.Name, namespace, port)
}

// ClusterSpec is TF_CONFIG's "cluster": every chief, worker and ps address, in index order. The
// evaluator is not part of the cluster (TensorFlow's convention): it only reads checkpoints.
func ClusterSpec(a *Args) map[string][]string {
	spec := map[string][]string{}
	for _, t := range a.Tasks {
		if t.Type == TypeEvaluator || t.Count == 0 {
			continue
		}
		for i := 0; i < t.Count; i++ {
			spec[t.Type] = append(spec[t.Type], Address(t, i, a.NamespaceDNS, a.Port))
		}
	}
	return spec
}

// ClusterSpecJSON is ClusterSpec as the JSON the entry script embeds (keys sorted).
func ClusterSpecJSON(a *Args) (string, error) {
	b, err := json.Marshal(ClusterSpec(a))
	if err != nil {
		return "", fmt.Errorf("cluster spec: %w", err)
	}
	return string(b), nil
}

// RenderScripts holds the entry script and the built-in program.
func RenderScripts(a *Args) *corev1.ConfigMapArgs {
	return &corev1.ConfigMapArgs{
		Metadata: a.Labels.ObjectMeta(a.ScriptsName, a.Namespace, "tfcluster"),
		Data: pulumi.StringMap{
			EntryScript:  pulumi.String(entryScript),
			Program:      pulumi.String(program),
			"release.py": pulumi.String(meta.ReleaseScript),
		},
	}
}

// RenderService is a task type's headless Service. Not-ready addresses are published: tasks
// connect to each other while they are still starting.
func RenderService(a *Args, t Task) *corev1.ServiceArgs {
	return a.Labels.HeadlessService(t.Name, a.Namespace, t.Name, true, meta.Port{Name: "grpc", Port: a.Port})
}

// Command is what every task runs: the entry script, then the program.
func Command(a *Args) (command, args []string) {
	command = []string{"/bin/sh", scriptsDir + "/" + EntryScript}
	if len(a.Command) == 0 {
		return command, []string{"python", scriptsDir + "/" + Program}
	}
	return command, a.Command
}

// RenderStatefulSet builds one task type. GPU tasks tolerate the GPU taint and request their
// GPUs; every task mounts the shared claim (checkpoints, logs) and scratch.
func RenderStatefulSet(a *Args, t Task) (*appsv1.StatefulSetArgs, error) {
	spec, err := ClusterSpecJSON(a)
	if err != nil {
		return nil, fmt.Errorf("task type %s: %w", t.Type, err)
	}
	command, args := Command(a)
	requests := pulumi.StringMap{"cpu": pulumi.String(t.CPU), "memory": pulumi.String(t.Memory)}
	cpuLimit := t.CPULimit
	if cpuLimit == "" {
		cpuLimit = t.CPU
	}
	limits := pulumi.StringMap{"cpu": pulumi.String(cpuLimit), "memory": pulumi.String(t.Memory)}
	var tolerations corev1.TolerationArray
	if t.GPUs > 0 {
		requests[meta.GPUResource] = pulumi.String(fmt.Sprint(t.GPUs))
		limits[meta.GPUResource] = pulumi.String(fmt.Sprint(t.GPUs))
		tolerations = corev1.TolerationArray{meta.GPUToleration()}
	}
	t.Fabric.AddTo(requests, limits)
	env := corev1.EnvVarArray{
		corev1.EnvVarArgs{Name: pulumi.String(ClusterEnv), Value: pulumi.String(spec)},
		corev1.EnvVarArgs{Name: pulumi.String(TaskTypeEnv), Value: pulumi.String(t.Type)},
		corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_LOG_DIR"), Value: pulumi.String(a.LogDir)},
		// The contract (meta/contract.go): the checkpoint directory (the TF charts' traindir) and
		// the run id, the directory's last element.
		corev1.EnvVarArgs{Name: pulumi.String(meta.CheckpointDirEnv), Value: pulumi.String(a.CheckpointDir)},
		corev1.EnvVarArgs{Name: pulumi.String(meta.RunIDEnv), Value: pulumi.String(path.Base(a.CheckpointDir))},
	}
	if a.EvalDir != "" { // tfcluster.evalDir; without it the template is as before
		env = append(env, corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_EVAL_DIR"), Value: pulumi.String(a.EvalDir)})
	}
	env = append(env, corev1.EnvVarArgs{Name: pulumi.String("PYTHONUNBUFFERED"), Value: pulumi.String("1")})
	chiefReleases := a.releases() && t.Type == TypeChief
	if chiefReleases {
		env = append(env, corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_ON_SUCCESS"), Value: pulumi.String(meta.OnSuccessRelease)},
			corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_RELEASE"), Value: pulumi.String(strings.Join(taskNames(a), " "))})
	}
	env = append(env, t.Fabric.EnvArray()...)
	env = append(env, a.Code.Env()...)
	env = append(env, meta.EnvArray(a.Env)...)
	mounts := append(a.SharedMounts(),
		meta.ShmMount(),
		corev1.VolumeMountArgs{Name: pulumi.String("scripts"), MountPath: pulumi.String(scriptsDir), ReadOnly: pulumi.Bool(true)},
	)
	mounts = append(mounts, a.Code.Mounts()...)
	volumes := append(a.SharedVolumes(),
		meta.ShmVolume(t.ShmSize),
		corev1.VolumeArgs{Name: pulumi.String("scripts"), ConfigMap: &corev1.ConfigMapVolumeSourceArgs{
			Name: pulumi.String(a.ScriptsName),
		}},
	)
	volumes = append(volumes, a.Code.Volumes()...)
	if chiefReleases {
		// Its token is mounted into the chief container only, not the code clone before it.
		volumes = append(volumes, meta.ReleaseTokenVolume())
		mounts = append(mounts, meta.ReleaseTokenMount())
	}
	replicas := t.Count
	if a.Suspend {
		replicas = 0
	}
	pod := &corev1.PodSpecArgs{
		SecurityContext:              meta.WorkloadSecurity(a.RunAsUser),
		NodeSelector:                 a.Labels.PoolSelector(t.Pool),
		ImagePullSecrets:             a.Labels.ImagePullSecrets(),
		Tolerations:                  tolerations,
		AutomountServiceAccountToken: pulumi.Bool(false),
		InitContainers:               a.Code.InitContainers(),
		// SIGTERM to SIGKILL: the chief's time to checkpoint.
		TerminationGracePeriodSeconds: pulumi.Int(graceSeconds(a)),
		Containers: corev1.ContainerArray{corev1.ContainerArgs{
			Name:    pulumi.String(t.Type),
			Image:   pulumi.String(t.Image), // the role's, default tfcluster.image
			Command: pulumi.ToStringArray(command),
			Args:    pulumi.ToStringArray(args),
			Env:     env,
			Ports: corev1.ContainerPortArray{corev1.ContainerPortArgs{
				Name: pulumi.String("grpc"), ContainerPort: pulumi.Int(a.Port),
			}},
			Resources: &corev1.ResourceRequirementsArgs{Requests: requests, Limits: limits},
			// TensorFlow needs no capability, nor to gain one.
			SecurityContext: meta.LockedDown(),
			VolumeMounts:    mounts,
		}},
		Volumes: volumes,
	}
	if chiefReleases {
		// Its token may scale the cluster's task types, and nothing else (meta.NewReleaser).
		pod.ServiceAccountName = pulumi.String(releaseName(a))
	}
	md := a.Labels.ObjectMeta(t.Name, a.Namespace, t.Name)
	podMeta := &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(t.Name))}
	if keep := a.Labels.KeepNode(t.Pool, nil); keep != nil {
		podMeta.Annotations = pulumi.ToStringMap(keep)
	}
	if a.Gang != nil {
		// A queued cluster may wait for admission: its tasks are not awaited (docs/queueing.md).
		md.Annotations.(pulumi.StringMap)[meta.SkipAwaitAnnotation] = pulumi.String("true")
		labels, annotations := a.Labels.PodLabels(t.Name), a.Labels.KeepNode(t.Pool, map[string]string{})
		a.Gang.PodLabels(labels)
		a.Gang.PodAnnotations(annotations)
		podMeta = &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(labels), Annotations: pulumi.ToStringMap(annotations)}
	}
	return &appsv1.StatefulSetArgs{
		Metadata: md,
		Spec: &appsv1.StatefulSetSpecArgs{
			Replicas:            pulumi.Int(replicas),
			ServiceName:         pulumi.String(t.Name),
			PodManagementPolicy: pulumi.String("Parallel"),
			Selector:            &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(t.Name))},
			Template:            &corev1.PodTemplateSpecArgs{Metadata: podMeta, Spec: pod},
		},
	}, nil
}

// RenderDisruptionBudget lets no voluntary disruption (a drain, the autoscaler's scale-down, a
// node upgrade) evict a task of the cluster spec: parameter-server training stops when a chief,
// worker or parameter server goes. The evaluator, outside the spec, only follows checkpoints and
// picks up again where it restarts: it gets none (nil).
func RenderDisruptionBudget(a *Args, t Task) *policyv1.PodDisruptionBudgetArgs {
	if t.Type == TypeEvaluator {
		return nil
	}
	return a.Labels.DisruptionBudget(t.Name, a.Namespace, t.Name, 0)
}

// RenderTensorBoard is the cluster's own TensorBoard over the shared log directory.
func RenderTensorBoard(a *Args) *appsv1.DeploymentArgs {
	tb := a.OwnTensorBoard
	return &appsv1.DeploymentArgs{
		Metadata: a.Labels.ObjectMeta(tb.Name, a.Namespace, tensorBoardComponent),
		Spec: &appsv1.DeploymentSpecArgs{
			Replicas: pulumi.Int(1),
			Selector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(tensorBoardComponent))},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(a.Labels.PodLabels(tensorBoardComponent))},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.PodSecurity(0),
					NodeSelector:                 a.Labels.PoolSelector(tb.Pool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String("tensorboard"),
						Image: pulumi.String(tb.Image),
						Command: pulumi.StringArray{
							pulumi.String("tensorboard"),
							pulumi.String("--logdir=" + tb.LogDir),
							pulumi.String("--bind_all"),
							pulumi.String(fmt.Sprintf("--port=%d", TensorBoardPort)),
						},
						Ports: corev1.ContainerPortArray{corev1.ContainerPortArgs{
							Name: pulumi.String("tensorboard"), ContainerPort: pulumi.Int(TensorBoardPort),
						}},
						ReadinessProbe: &corev1.ProbeArgs{
							TcpSocket: &corev1.TCPSocketActionArgs{Port: pulumi.Int(TensorBoardPort)}, PeriodSeconds: pulumi.Int(10),
						},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("250m"), "memory": pulumi.String("2Gi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("2"), "memory": pulumi.String("2Gi")},
						},
						SecurityContext: meta.LockedDown(),
						VolumeMounts:    corev1.VolumeMountArray{meta.Mount("shared", a.MountPath)},
					}},
					Volumes: corev1.VolumeArray{meta.ClaimVolume("shared", a.Claim)},
				},
			},
		},
	}
}

// RenderTensorBoardService exposes the cluster's own TensorBoard.
func RenderTensorBoardService(a *Args) *corev1.ServiceArgs {
	return &corev1.ServiceArgs{
		Metadata: a.Labels.ServiceMeta(a.OwnTensorBoard.Name, a.Namespace, tensorBoardComponent),
		Spec: &corev1.ServiceSpecArgs{
			Selector: pulumi.ToStringMap(a.Labels.Selector(tensorBoardComponent)),
			Ports: corev1.ServicePortArray{corev1.ServicePortArgs{
				Name: pulumi.String("tensorboard"), Port: pulumi.Int(TensorBoardPort), TargetPort: pulumi.Int(TensorBoardPort),
			}},
		},
	}
}

// graceSeconds is every task's grace period: tfcluster.terminationGracePeriodSeconds, filled by
// the stack (meta.DefaultTerminationGraceSeconds, within the Spot pools' notice).
func graceSeconds(a *Args) int {
	if a.TerminationGracePeriodSeconds > 0 {
		return a.TerminationGracePeriodSeconds
	}
	return meta.DefaultTerminationGraceSeconds
}
