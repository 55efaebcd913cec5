// Package elastic runs elastic PyTorch training: a StatefulSet of torchrun workers behind a
// headless Service, each with its node's GPUs, finding each other through a rendezvous (c10d,
// hosted by worker 0, or the etcd component), between a minimum and a maximum number of nodes.
//
// Scaling is a config change that leaves running workers alone. The pod template holds nothing
// that depends on the number of nodes: the worker count is the StatefulSet's replicas (an
// in-place update that adds or removes pods), and torchrun's --nnodes=MIN:MAX is read at
// container start from the <Name>-scale ConfigMap through an environment variable. A new or
// restarted worker gets the new bounds; running workers keep theirs until torchrun restarts,
// and the rendezvous (shared state in etcd or worker 0's store) admits the newcomers.
package elastic

import (
	"errors"
	"fmt"
	"strings"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/fabric"
	"kolotoc/components/meta"
)

// Rendezvous backends torchrun accepts here.
const (
	BackendC10d   = "c10d"    // a TCPStore hosted by worker 0; no extra service
	BackendEtcdV2 = "etcd-v2" // etcd's v2 API through python-etcd
	BackendEtcd   = "etcd"    // the original torchelastic etcd backend, also v2
)

const (
	// Name is the workers' object name in a stack (Args.Name): their StatefulSet, headless Service
	// and ConfigMaps, pods elastic-0 …; Component, their app.kubernetes.io/component label, is the
	// same word.
	Name      = "elastic"
	Component = Name
	// NNodesKey is the key of the scale ConfigMap that holds MIN:MAX.
	NNodesKey = "nnodes"
	// nnodesEnv carries NNodesKey into the container; torchrun's arguments reference it.
	nnodesEnv = "KOLOTOC_NNODES"
	// rdzvConfEnv carries elastic.rdzvConf (RdzvConfString) to the wrapper.
	rdzvConfEnv = "KOLOTOC_RDZV_CONF"
	// scriptsDir is where the built-in training check is mounted.
	scriptsDir = "/etc/kolotoc/elastic"
	// CheckScript is the built-in check run when no command is configured.
	CheckScript = scriptsDir + "/check.py"
	// launchScriptKey is the torchrun wrapper's key in the scripts ConfigMap.
	launchScriptKey = "torchrun.sh"
	// pythonEtcd is the python-etcd release torch's etcd backends import; the wrapper installs it
	// when the image lacks it.
	pythonEtcd = "python-etcd==0.4.5"
)

// Args are the elastic workers' inputs: their section (kolotoc:elastic, defaulted and
// validated), the site the stack gives every workload, and what the stack derives. The site's
// PodDeps also hold the etcd StatefulSet when an etcd backend is used.
type Args struct {
	Config
	meta.Site
	Name          string // StatefulSet, headless Service, ConfigMap prefix; pods Name-0 …
	CPULimit      string // CPU limit per worker (quantity); default CPU
	EtcdEndpoint  string // host:port of the etcd client Service (etcd backends)
	CheckpointDir string // checkpoint directory on the claim, given to the script as KOLOTOC_CHECKPOINT_DIR
	// Fabric is what each worker takes of its pool's fabric (EFA interfaces, their huge pages,
	// NCCL's environment), as the towers do; zero for none.
	Fabric fabric.Share
	// Queue admits the first minNodes workers, their StatefulSet, as one unit through Kueue's
	// StatefulSet integration (kolotoc:queue; meta.SetGang): a lost worker's replacement runs
	// under the same admission. nil: not queued. The workers above minNodes are then the extras
	// (ExtraName), each admitted on its own, at ExtraPriority.
	Queue *meta.SetGang
	// ExtraPriority is the extras' WorkloadPriorityClass, below the group's, so that a queue
	// that preempts takes extras back before it holds a group waiting.
	ExtraPriority string
}

// ExtraName is the StatefulSet of the workers above minNodes when the workers are queued: its
// pods are Name-extra-<minNodes> … (their ordinals continue the first set's).
func ExtraName(a *Args) string { return a.Name + "-extra" }

// extras is how many workers run in the extra set: those above minNodes when queued, else none
// (one StatefulSet holds them all).
func extras(a *Args) int {
	if a.Queue == nil {
		return 0
	}
	return max(a.Nodes-a.MinNodes, 0)
}

// released are the StatefulSets onSuccess: release scales to zero.
func released(a *Args) []string {
	if extras(a) > 0 {
		return []string{a.Name, ExtraName(a)}
	}
	return []string{a.Name}
}

func (a *Args) releases() bool { return a.OnSuccess == meta.OnSuccessRelease }

// Elastic is the elastic workers.
type Elastic struct {
	pulumi.ResourceState
	StatefulSet *appsv1.StatefulSet
	Endpoint    pulumi.StringOutput // the rendezvous endpoint the workers use
}

// New registers the workers.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Elastic, error) {
	if args == nil {
		return nil, errors.New("elastic: args are required")
	}
	if args.MinNodes < 1 || args.MaxNodes < args.MinNodes || args.GPUsPerNode < 0 {
		return nil, fmt.Errorf("elastic %q: need 1 <= minNodes <= maxNodes and gpusPerNode >= 0 (0: CPU workers)", name)
	}
	if args.RdzvBackend != BackendC10d && args.EtcdEndpoint == "" {
		return nil, fmt.Errorf("elastic %q: rendezvous backend %s needs an etcd endpoint", name, args.RdzvBackend)
	}
	e := &Elastic{}
	if err := ctx.RegisterComponentResource("kolotoc:elastic:Elastic", name, e, opts...); err != nil {
		return nil, fmt.Errorf("elastic %q: %w", name, err)
	}
	scale, err := corev1.NewConfigMap(ctx, name+"-scale", RenderScaleConfigMap(args), pulumi.Parent(e))
	if err != nil {
		return nil, fmt.Errorf("elastic %q: ConfigMap %q: %w", name, name+"-scale", err)
	}
	scripts, err := corev1.NewConfigMap(ctx, name+"-scripts", RenderScripts(args), pulumi.Parent(e))
	if err != nil {
		return nil, fmt.Errorf("elastic %q: ConfigMap %q: %w", name, name+"-scripts", err)
	}
	svc, err := corev1.NewService(ctx, name, RenderService(args), pulumi.Parent(e))
	if err != nil {
		return nil, fmt.Errorf("elastic %q: Service %q: %w", name, name, err)
	}
	// The wait for the rendezvous store is the StatefulSet's alone: a component that depends on
	// another blocks the program until that one is ready, holding up everything registered after.
	// A new pod shape (GPUs, CPU, memory, pool) replaces the workers as a whole: a rolling
	// update to it can stall for good on a full pool (meta.PodShape). Other changes (image,
	// command) roll worker by worker, which the rendezvous survives; scaling stays in place.
	deps := append([]pulumi.Resource{scale, scripts, svc}, args.PodDeps...)
	if args.releases() {
		rel, err := meta.NewReleaser(ctx, args.Name+"-release", args.Namespace, args.Labels, Component, released(args), pulumi.Parent(e))
		if err != nil {
			return nil, fmt.Errorf("elastic %q: %w", name, err)
		}
		deps = append(deps, rel.Deps...)
	}
	e.StatefulSet, err = appsv1.NewStatefulSet(ctx, name, RenderStatefulSet(args), pulumi.Parent(e),
		pulumi.DependsOn(deps), meta.ReplaceOnChangesOf(replaceOn(args)))
	if err != nil {
		return nil, fmt.Errorf("elastic %q: StatefulSet %q: %w", name, name, err)
	}
	if extras(args) > 0 {
		// The extras wait for the first set's objects only: Kueue orders their admission.
		if _, err := appsv1.NewStatefulSet(ctx, name+"-extra", RenderExtraStatefulSet(args), pulumi.Parent(e),
			pulumi.DependsOn(deps), meta.ReplaceOnChangesOf(meta.PodShape)); err != nil {
			return nil, fmt.Errorf("elastic %q: StatefulSet %q: %w", name, name+"-extra", err)
		}
	}
	if _, err := policyv1.NewPodDisruptionBudget(ctx, name, RenderDisruptionBudget(args), pulumi.Parent(e)); err != nil {
		return nil, fmt.Errorf("elastic %q: PodDisruptionBudget %q: %w", name, name, err)
	}
	e.Endpoint = pulumi.String(Endpoint(args)).ToStringOutput()
	return e, meta.RegisterOutputs(ctx, e, pulumi.Map{"rendezvousEndpoint": e.Endpoint})
}

// Endpoint is torchrun's --rdzv_endpoint: worker 0's store for c10d, else the etcd Service.
func Endpoint(a *Args) string {
	if a.RdzvBackend == BackendC10d {
		return fmt.Sprintf("%s-0.%s.%s.svc:%d", a.Name, a.Name, a.NamespaceDNS, a.RdzvPort)
	}
	return a.EtcdEndpoint
}

// NNodes is torchrun's --nnodes value.
func NNodes(a *Args) string { return fmt.Sprintf("%d:%d", a.MinNodes, a.MaxNodes) }

// TorchrunArgs are torchrun's arguments: its options, then the training script and its
// arguments. The options are spelled with underscores, which every torchrun accepts; the
// dashed spellings exist only since PyTorch 2 (1.13's torchrun refuses them). --nnodes comes
// from the scale ConfigMap through $(KOLOTOC_NNODES), which the kubelet expands when the
// container starts.
func TorchrunArgs(a *Args) []string {
	args := []string{
		"--nnodes=$(" + nnodesEnv + ")",
		fmt.Sprintf("--nproc_per_node=%d", procsPerNode(a)),
		"--rdzv_backend=" + a.RdzvBackend,
		"--rdzv_endpoint=" + Endpoint(a),
		"--rdzv_id=" + a.RdzvID,
		fmt.Sprintf("--max_restarts=%d", a.MaxRestarts),
	}
	if len(a.Command) == 0 {
		return append(args, CheckScript)
	}
	return append(args, a.Command...)
}

// procsPerNode is torchrun's --nproc_per_node: one process per GPU, or one for a CPU worker
// (torchrun with 0 processes would start none).
func procsPerNode(a *Args) int { return max(a.GPUsPerNode, 1) }

// Command is the workers' entry: a wrapper that runs torchrun with TorchrunArgs.
func Command() []string { return []string{"/bin/sh", scriptsDir + "/" + launchScriptKey} }

// RenderScaleConfigMap holds what may change while the workers run: --nnodes.
func RenderScaleConfigMap(a *Args) *corev1.ConfigMapArgs {
	return &corev1.ConfigMapArgs{
		Metadata: a.Labels.ObjectMeta(a.Name+"-scale", a.Namespace, Component),
		Data:     pulumi.StringMap{NNodesKey: pulumi.String(NNodes(a))},
	}
}

// RenderScripts holds the torchrun wrapper and the built-in check; neither depends on the
// configuration, so they never change while workers run.
func RenderScripts(a *Args) *corev1.ConfigMapArgs {
	return &corev1.ConfigMapArgs{
		Metadata: a.Labels.ObjectMeta(a.Name+"-scripts", a.Namespace, Component),
		Data: pulumi.StringMap{
			launchScriptKey: pulumi.String(launchScript),
			"check.py":      pulumi.String(checkScript),
			"release.py":    pulumi.String(meta.ReleaseScript),
		},
	}
}

// RenderService is the headless Service that names the workers; worker 0's name is the c10d
// endpoint, so it resolves before the pod is ready.
func RenderService(a *Args) *corev1.ServiceArgs {
	return a.Labels.HeadlessService(a.Name, a.Namespace, Component, true, meta.Port{Name: "rendezvous", Port: a.RdzvPort})
}

// RenderDisruptionBudget lets voluntary disruptions (drains, the autoscaler's scale-down, node
// upgrades) take workers only down to minNodes, below which torchrun stops the run.
func RenderDisruptionBudget(a *Args) *policyv1.PodDisruptionBudgetArgs {
	return a.Labels.DisruptionBudget(a.Name, a.Namespace, Component, MaxUnavailable(a))
}

// MaxUnavailable is how many workers a drain may take at once: nodes - minNodes, at least 0.
func MaxUnavailable(a *Args) int { return max(a.Nodes-a.MinNodes, 0) }

// SetLabel tells the extra workers' pods (value "extra") from the first set's when the workers
// are queued: the extras' StatefulSet selects on it. The first set's selector is the one it had
// before queueing (a selector cannot change), so it matches the extras too; it does not adopt
// them, as they have an owner.
const SetLabel = "kolotoc.dev/elastic-set"

// RenderStatefulSet builds the workers: one per node where the pool allows (preferred
// anti-affinity), started in parallel, each with its GPUs, the GPU toleration, the shared
// claim, scratch and a memory-backed /dev/shm. Queued, it holds the first minNodes workers, one
// StatefulSet queued as one unit (meta.SetGang; RenderExtraStatefulSet holds the rest).
func RenderStatefulSet(a *Args) *appsv1.StatefulSetArgs {
	replicas := a.Nodes
	labels := a.Labels.PodLabels(Component)
	if a.Queue != nil {
		replicas = a.MinNodes
		a.Queue.Labels(labels)
	}
	set := renderSet(a, a.Name, replicas, labels, a.Labels.KeepNode(a.Pool, nil), a.Labels.Selector(Component), 0)
	a.Queue.MarkSet(set.Metadata.(*metav1.ObjectMetaArgs))
	return set
}

// replaceOn are the first set's paths whose change replaces it: what shapes its pods and its
// queue label, and queued, its whole spec and annotations (meta.SetGang).
func replaceOn(a *Args) []string {
	if a.Queue != nil {
		return meta.QueuedSetReplaceOn
	}
	return append(append([]string{}, meta.PodShape...), meta.QueueLabelPath)
}

// RenderExtraStatefulSet builds the workers above minNodes when the workers are queued: each
// pod is admitted by the queue on its own, at the extras' lower priority, and joins the running
// rendezvous (torchrun's --nnodes MIN:MAX lets it), as a worker added by a scale-up does. Their
// ordinals continue the first set's (elastic-extra-<minNodes> …), so that worker N is N in both.
func RenderExtraStatefulSet(a *Args) *appsv1.StatefulSetArgs {
	labels := a.Labels.PodLabels(Component)
	labels[SetLabel] = "extra"
	meta.QueuedPodLabels(labels, a.Queue.Queue, a.ExtraPriority)
	selector := a.Labels.Selector(Component)
	selector[SetLabel] = "extra"
	return renderSet(a, ExtraName(a), extras(a), labels, a.Labels.KeepNode(a.Pool, nil), selector, a.MinNodes)
}

// renderSet is a StatefulSet of workers: name, replicas (none when suspended), its pods' labels
// and annotations, its selector, and its first ordinal.
func renderSet(a *Args, name string, replicas int, podLabels, podAnnotations, selector map[string]string, start int) *appsv1.StatefulSetArgs {
	requests := pulumi.StringMap{"cpu": pulumi.String(a.CPU), "memory": pulumi.String(a.Memory)}
	limits := pulumi.StringMap{"cpu": pulumi.String(cpuLimit(a)), "memory": pulumi.String(a.Memory)}
	var tolerations corev1.TolerationArrayInput // none for a CPU worker
	if a.GPUsPerNode > 0 {
		gpus := pulumi.String(fmt.Sprint(a.GPUsPerNode))
		requests[meta.GPUResource], limits[meta.GPUResource] = gpus, gpus
		tolerations = corev1.TolerationArray{meta.GPUToleration()}
	}
	a.Fabric.AddTo(requests, limits)
	env := corev1.EnvVarArray{
		corev1.EnvVarArgs{Name: pulumi.String(nnodesEnv), ValueFrom: &corev1.EnvVarSourceArgs{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelectorArgs{Name: pulumi.String(a.Name + "-scale"), Key: pulumi.String(NNodesKey)},
		}},
		corev1.EnvVarArgs{Name: pulumi.String("POD_NAME"), ValueFrom: &corev1.EnvVarSourceArgs{
			FieldRef: &corev1.ObjectFieldSelectorArgs{FieldPath: pulumi.String("metadata.name")},
		}},
		corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_RDZV_BACKEND"), Value: pulumi.String(a.RdzvBackend)},
		// The contract (meta/contract.go): the checkpoint directory and the run id (rdzvId); the
		// attempt is torchrun's TORCHELASTIC_RESTART_COUNT, which it gives every rank.
		corev1.EnvVarArgs{Name: pulumi.String(meta.CheckpointDirEnv), Value: pulumi.String(a.CheckpointDir)},
		corev1.EnvVarArgs{Name: pulumi.String(meta.RunIDEnv), Value: pulumi.String(a.RdzvID)},
		corev1.EnvVarArgs{Name: pulumi.String("PYTHONUNBUFFERED"), Value: pulumi.String("1")},
	}
	if conf := RdzvConfString(a.RdzvConf); conf != "" {
		// The wrapper joins them to its own is_host: a second --rdzv_conf would replace the first.
		env = append(env, corev1.EnvVarArgs{Name: pulumi.String(rdzvConfEnv), Value: pulumi.String(conf)})
	}
	if a.releases() {
		env = append(env, corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_ON_SUCCESS"), Value: pulumi.String(meta.OnSuccessRelease)},
			corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_RELEASE"), Value: pulumi.String(strings.Join(released(a), " "))})
	}
	env = append(env, a.Fabric.EnvArray()...)
	env = append(env, a.Code.Env()...)
	env = append(env, meta.EnvArray(a.Env)...)
	mounts := append(a.SharedMounts(),
		meta.ShmMount(),
		corev1.VolumeMountArgs{Name: pulumi.String("scripts"), MountPath: pulumi.String(scriptsDir), ReadOnly: pulumi.Bool(true)},
	)
	mounts = append(mounts, a.Code.Mounts()...)
	volumes := append(a.SharedVolumes(),
		meta.ShmVolume(a.ShmSize),
		corev1.VolumeArgs{Name: pulumi.String("scripts"), ConfigMap: &corev1.ConfigMapVolumeSourceArgs{
			Name: pulumi.String(a.Name + "-scripts"),
		}},
	)
	volumes = append(volumes, a.Code.Volumes()...)
	if a.releases() {
		// Its token is mounted into the worker container only, not the code clone before it.
		volumes = append(volumes, meta.ReleaseTokenVolume())
		mounts = append(mounts, meta.ReleaseTokenMount())
	}
	if a.Suspend {
		replicas = 0
	}
	spec := &corev1.PodSpecArgs{
		SecurityContext:              meta.WorkloadSecurity(a.RunAsUser),
		NodeSelector:                 a.Labels.PoolSelector(a.Pool),
		ImagePullSecrets:             a.Labels.ImagePullSecrets(),
		Tolerations:                  tolerations,
		AutomountServiceAccountToken: pulumi.Bool(false),
		// SIGTERM to SIGKILL: torchrun passes SIGTERM to the ranks, which checkpoint.
		TerminationGracePeriodSeconds: pulumi.Int(graceSeconds(a)),
		Affinity:                      a.Labels.SpreadAcrossNodes(Component),
		InitContainers:                a.Code.InitContainers(),
		Containers: corev1.ContainerArray{corev1.ContainerArgs{
			Name:    pulumi.String(workerContainer),
			Image:   pulumi.String(a.Image),
			Command: pulumi.ToStringArray(Command()),
			Args:    pulumi.ToStringArray(TorchrunArgs(a)),
			Env:     env,
			Ports: corev1.ContainerPortArray{corev1.ContainerPortArgs{
				Name: pulumi.String("rendezvous"), ContainerPort: pulumi.Int(a.RdzvPort),
			}},
			Resources: &corev1.ResourceRequirementsArgs{
				Requests: requests,
				Limits:   limits,
			},
			// torchrun, NCCL and gloo need no capability, nor to gain one.
			SecurityContext: meta.LockedDown(),
			VolumeMounts:    mounts,
		}},
		Volumes: volumes,
	}
	if a.releases() {
		// Its token may scale the workers, and nothing else (meta.NewReleaser).
		spec.ServiceAccountName = pulumi.String(a.Name + "-release")
	}
	md := a.Labels.ObjectMeta(name, a.Namespace, Component)
	if a.Queue != nil {
		// Queued workers may wait for admission for hours, their pods gated: `pulumi up` does not
		// wait for their readiness (it would fail after awaitTimeout); docs/queueing.md.
		md.Annotations.(pulumi.StringMap)[meta.SkipAwaitAnnotation] = pulumi.String("true")
	}
	template := &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(podLabels)}
	if podAnnotations != nil {
		template.Annotations = pulumi.ToStringMap(podAnnotations)
	}
	set := &appsv1.StatefulSetSpecArgs{
		Replicas: pulumi.Int(replicas),
		// Every worker's name resolves through the one headless Service (its selector, the
		// component, takes the extras in too): torchrun publishes its host's name to its peers.
		ServiceName:         pulumi.String(a.Name),
		PodManagementPolicy: pulumi.String("Parallel"),
		Selector:            &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(selector)},
		Template:            &corev1.PodTemplateSpecArgs{Metadata: template, Spec: spec},
	}
	if start > 0 {
		set.Ordinals = &appsv1.StatefulSetOrdinalsArgs{Start: pulumi.Int(start)}
	}
	return &appsv1.StatefulSetArgs{Metadata: md, Spec: set}
}

// graceSeconds is the workers' grace period: elastic.terminationGracePeriodSeconds, filled by the
// stack (meta.DefaultTerminationGraceSeconds, within a Spot pool's notice).
func graceSeconds(a *Args) int {
	if a.TerminationGracePeriodSeconds > 0 {
		return a.TerminationGracePeriodSeconds
	}
	return meta.DefaultTerminationGraceSeconds
}

func cpuLimit(a *Args) string {
	if a.CPULimit != "" {
		return a.CPULimit
	}
	return a.CPU
}

// launchScript runs torchrun.
//
// c10d: torchrun decides whether it hosts the rendezvous store by comparing --rdzv_endpoint's
// host with its own hostname and canonical name. The endpoint is worker 0's Service name
// (elastic-0.elastic.<ns>.svc), which equals neither (elastic-0, elastic-0.elastic.<ns>.svc.
// cluster.local): no worker would host the store and every one would wait for it. So the wrapper
// says it: is_host=true on worker 0 (POD_NAME ends in -0), false elsewhere. Queued extras
// (RenderExtraStatefulSet) start at ordinal minNodes, at least 1: none of them ends in -0.
//
// elastic.rdzvConf reaches the wrapper as $KOLOTOC_RDZV_CONF (key=value,…), joined to is_host:
// torchrun keeps only the last --rdzv_conf it is given, so the two must be one.
//
// etcd: torch's etcd rendezvous backends import python-etcd, which the stock PyTorch images
// lack: the wrapper installs it from PyPI when it is missing (bake it into your image for
// clusters without a way out), into the user's site-packages when it does not run as root. python3, not python: images without the alias exist (Debian's).
const launchScript = `#!/bin/sh
set -eu
case "$KOLOTOC_RDZV_BACKEND" in
  c10d)
    case "$POD_NAME" in
      *-0) set -- "--rdzv_conf=is_host=true${KOLOTOC_RDZV_CONF:+,$KOLOTOC_RDZV_CONF}" "$@" ;;
      *) set -- "--rdzv_conf=is_host=false${KOLOTOC_RDZV_CONF:+,$KOLOTOC_RDZV_CONF}" "$@" ;;
    esac ;;
  etcd|etcd-v2)
    if [ -n "${KOLOTOC_RDZV_CONF:-}" ]; then set -- "--rdzv_conf=$KOLOTOC_RDZV_CONF" "$@"; fi
    if ! python3 -c 'import etcd' 2>/dev/null; then
      echo "elastic: the image has no python-etcd, which the $KOLOTOC_RDZV_BACKEND rendezvous needs; installing ` + pythonEtcd + `" >&2
      python3 -m pip install --no-cache-dir --quiet $([ "$(id -u)" = 0 ] || echo --user) '` + pythonEtcd + `'
    fi ;;
esac
echo "elastic: $(hostname): torchrun $*" >&2
if [ "${KOLOTOC_ON_SUCCESS:-keep}" != release ]; then
  exec torchrun "$@"
fi
status=0
torchrun "$@" || status=$?
if [ "$status" = 0 ]; then
  # onSuccess release: the run is done; the workers go, and their GPUs with them.
  echo "elastic: $(hostname): torchrun succeeded; releasing the workers (onSuccess: release)" >&2
  # KOLOTOC_RELEASE: the StatefulSets' names, space-separated (queued: the group's and the extras').
  python3 ` + scriptsDir + `/release.py $KOLOTOC_RELEASE || echo "elastic: could not release the workers" >&2
fi
exit "$status"
`

// checkScript proves a new environment: every rank joins the process group, all-reduces a one
// and checks the sum is the world size, rank 0 writes the result beside the checkpoints. It then
// idles, so that a worker joining later makes torchrun re-form the group and run it again.
const checkScript = `"""Kolotoc's elastic check: one all-reduce over every rank, then idle."""
import datetime
import os
import time

import torch
import torch.distributed as dist


def main():
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    one = torch.ones(1, device="cuda" if cuda else "cpu")
    dist.all_reduce(one)
    ok = int(one.item()) == world
    print(f"rank {rank}/{world}: all-reduce {'ok' if ok else 'WRONG'} ({int(one.item())})", flush=True)
    if rank == 0:
        out = os.environ.get("KOLOTOC_CHECKPOINT_DIR", "/tmp")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "elastic-check.txt"), "a") as f:
            f.write(f"{datetime.datetime.now().isoformat()} world={world} ok={ok}\n")
    dist.barrier()
    if not ok:
        raise SystemExit(1)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
`
