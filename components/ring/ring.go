// Package ring runs the MPI/Horovod "towers": a worker StatefulSet behind a headless Service, each
// tower running sshd with its GPUs (or none: CPU towers), and a launcher Job that waits for every tower, writes the
// hostfile and runs mpirun/horovodrun. The number of registered resources does not depend on the
// number of towers.
package ring

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	rbacv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/rbac/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/fabric"
	"kolotoc/components/meta"
)

const (
	// Component labels of the towers and the launcher: the same words as their object names.
	towerComponent    = Name
	launcherComponent = LauncherName
	// sshKeyMode is the mode of the mounted key files (0600): sshd and ssh refuse laxer ones.
	sshKeyMode = 0o600
	// launcherBackoffLimit: new pods for a launcher pod that failed before its run did (its code
	// clone, ssh set-up, a deleted pod); the run's own failures are retried inside the pod
	// (towers.maxRestarts, launcherScript) and fail the Job at once past their limit.
	launcherBackoffLimit = 2
	// rootHostfilePath, userHostfilePath: where the launcher writes the hostfile for mpirun, as
	// root and as another user. Root's stays where it was before runAsUser existed: the path is
	// in the launcher's pod template, and a new template would replace a running launcher (a new
	// run) at the upgrade.
	rootHostfilePath = "/root/hostfile"
	userHostfilePath = "/tmp/hostfile"
	// TowerHostfilePath is the hostfile as every tower mounts it (the scripts ConfigMap).
	TowerHostfilePath = "/etc/kolotoc/scripts/hostfile"
	// launcherCPULimit, launcherMemoryLimit: the launcher's limits (cores, bytes), unless its
	// request is larger; ssh and mpirun compute nothing, but a wrapper script may.
	launcherCPULimit    = "2"
	launcherMemoryLimit = "4Gi"
	// sshdRunDirSize bounds sshdRunDir's emptyDir: a host key and a pid file take a few KiB.
	sshdRunDirSize = "1Mi"
)

// Object names of the towers and the launcher in a stack (Args.Name, Args.LauncherName): the
// towers' StatefulSet and headless Service (pods tower-0 … tower-N) and the MPI launcher Job.
const (
	Name         = "tower"
	LauncherName = "launcher"
)

// Component labels of the towers and the launcher, for the NetworkPolicies that select them.
const (
	TowerComponent    = towerComponent
	LauncherComponent = launcherComponent
)

// towerCapabilities are all the towers keep of root's capabilities when they run as root
// (runAsUser 0): what sshd needs to accept the launcher's connection. SYS_CHROOT, SETUID and SETGID for its privilege-separated child
// (chroot to /run/sshd, then the sshd user), SETGID again to set the session's groups, CHOWN for
// the session's tty, AUDIT_WRITE for the login record (Linux-audit builds of sshd refuse a root
// login they cannot record). All are within Pod Security baseline. DAC_OVERRIDE is not among
// them: the ranks run as root but cannot write into another user's directories on the shared
// claim without the directory's permission bits allowing it. A tower that runs as another user
// keeps none: its sshd lets in only that user, which takes no privilege.
var towerCapabilities = []string{"AUDIT_WRITE", "CHOWN", "SETGID", "SETUID", "SYS_CHROOT"}

// towerSecurity is the tower container's security context.
func towerSecurity(a *Args) *corev1.SecurityContextArgs {
	if a.RunAsUser != 0 {
		return meta.LockedDown()
	}
	return meta.LockedDown(towerCapabilities...)
}

// Args are the ring's inputs: the towers' section (kolotoc:towers, defaulted and validated), the
// site the stack gives every workload, and what the stack derives for the ring.
type Args struct {
	Config
	meta.Site
	Name         string                 // StatefulSet and headless Service name; pods are <Name>-<i>
	LauncherName string                 // launcher Job name
	CPULimit     string                 // CPU limit per tower (quantity); default CPU
	WaitSeconds  int                    // how long the launcher waits for every tower to accept ssh (seconds); default 900
	SSHKeySeed   pulumi.StringInput     // secret seed the ssh keys derive from
	KeyBinding   Binding                // what the keys are bound to (project, stack, namespace)
	Sidecars     []corev1.ContainerArgs // extra containers beside each tower (Dask sentinels)
	// ShareProcesses puts the tower and its sidecars in one process namespace (sentinels.watchProcesses).
	ShareProcesses bool
	Fabric         Fabric // the towers' pool's fast network between nodes; zero: none
	// Queue admits the towers as one unit through Kueue's StatefulSet integration (kolotoc:queue;
	// meta.SetGang); nil: each pod is scheduled as it comes. The launcher is not queued: a small
	// CPU pod, it waits for the towers' admission as long as that takes (KOLOTOC_QUEUED).
	Queue *meta.SetGang
	// CheckpointDir is the run's checkpoint directory on the shared claim, given to the launcher
	// (and by mpirun -x to the ranks) as KOLOTOC_CHECKPOINT_DIR.
	CheckpointDir string
}

// StateName is the ConfigMap that holds the run's state (launcherScript), of the launcher called
// launcherName; the output runState prints it.
func StateName(launcherName string) string { return launcherName + "-state" }

// launcherAccount is the launcher's service account: the release account when it releases the
// towers, else its own. Either may patch the state ConfigMap (RenderStateRole).
func launcherAccount(a *Args) string {
	if a.releases() {
		return a.LauncherName + "-release"
	}
	return a.LauncherName
}

// Fabric is what the towers take of their pool's fabric (fabric.Share): the devices each tower
// requests beside its GPUs (EFA interfaces and their huge pages), and the environment NCCL needs
// to use them, which every rank gets: the towers' containers, the launcher, and every sshd
// session on a tower (mpirun's and horovodrun's ranks are such sessions, and sshd hands them none
// of the pod's environment).
type Fabric = fabric.Share

// releases reports whether the launcher releases the towers when its run succeeds.
func (a *Args) releases() bool { return a.OnSuccess == meta.OnSuccessRelease }

// Ring is the towers and their launcher.
type Ring struct {
	pulumi.ResourceState
	StatefulSet *appsv1.StatefulSet
	Launcher    *batchv1.Job
	// HostnamePattern names every tower's fully qualified hostname in one string of a size that
	// does not grow with the number of towers (bash brace expansion: tower-{0..N-1}.tower.<ns>.svc).
	HostnamePattern string
}

// New registers the ring.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Ring, error) {
	if args == nil {
		return nil, errors.New("ring: args are required")
	}
	if args.Count < 1 || args.Slots < 1 || args.GPUsPerTower < 0 {
		return nil, fmt.Errorf("ring %q: towers and slots must be at least 1, gpusPerTower at least 0", name)
	}
	if args.LauncherCPU == "" || args.LauncherMemory == "" {
		return nil, fmt.Errorf("ring %q: the launcher's CPU and memory requests are required", name)
	}
	r := &Ring{}
	if err := ctx.RegisterComponentResource("kolotoc:ring:Ring", name, r, opts...); err != nil {
		return nil, fmt.Errorf("ring %q: %w", name, err)
	}
	secret, err := corev1.NewSecret(ctx, name+"-ssh", RenderSSHSecret(args), pulumi.Parent(r))
	if err != nil {
		return nil, fmt.Errorf("ring %q: Secret %q: %w", name, name+"-ssh", err)
	}
	scripts, err := corev1.NewConfigMap(ctx, name+"-scripts", RenderScripts(args), pulumi.Parent(r))
	if err != nil {
		return nil, fmt.Errorf("ring %q: ConfigMap %q: %w", name, name+"-scripts", err)
	}
	svc, err := corev1.NewService(ctx, name, RenderService(args), pulumi.Parent(r))
	if err != nil {
		return nil, fmt.Errorf("ring %q: Service %q: %w", name, name, err)
	}
	deps := pulumi.DependsOn([]pulumi.Resource{secret, scripts, svc})
	var launcherDeps []pulumi.Resource
	if args.releases() {
		rel, err := meta.NewReleaser(ctx, args.LauncherName+"-release", args.Namespace, args.Labels, launcherComponent,
			[]string{args.Name}, pulumi.Parent(r))
		if err != nil {
			return nil, fmt.Errorf("ring %q: %w", name, err)
		}
		launcherDeps = rel.Deps
	} else {
		sa, err := corev1.NewServiceAccount(ctx, name+"-launcher", &corev1.ServiceAccountArgs{
			Metadata: args.Labels.ObjectMeta(args.LauncherName, args.Namespace, launcherComponent),
			// The launcher mounts its token into its own container only (RenderLauncher).
			AutomountServiceAccountToken: pulumi.Bool(false),
		}, pulumi.Parent(r))
		if err != nil {
			return nil, fmt.Errorf("ring %q: ServiceAccount %q: %w", name, args.LauncherName, err)
		}
		launcherDeps = append(launcherDeps, sa)
	}
	// The run's state: the launcher writes its data (IgnoreChanges: not Pulumi's to reset; a new
	// launcher Job starts a new state, keyed by its uid).
	stateMap, err := corev1.NewConfigMap(ctx, name+"-state", RenderState(args), pulumi.Parent(r), pulumi.IgnoreChanges([]string{"data"}))
	if err != nil {
		return nil, fmt.Errorf("ring %q: ConfigMap %q: %w", name, StateName(args.LauncherName), err)
	}
	role, err := rbacv1.NewRole(ctx, name+"-state", RenderStateRole(args), pulumi.Parent(r))
	if err != nil {
		return nil, fmt.Errorf("ring %q: Role %q: %w", name, StateName(args.LauncherName), err)
	}
	binding, err := rbacv1.NewRoleBinding(ctx, name+"-state", RenderStateRoleBinding(args), pulumi.Parent(r), pulumi.DependsOn(append([]pulumi.Resource{role}, launcherDeps...)))
	if err != nil {
		return nil, fmt.Errorf("ring %q: RoleBinding %q: %w", name, StateName(args.LauncherName), err)
	}
	launcherDeps = append(launcherDeps, stateMap, role, binding)
	// Any change of the towers' pods restarts the ring anyway (mpirun ends with its first rank):
	// it is rolled as a whole, never rank by rank, which on a full GPU pool can stall for good
	// (meta.PodShape). The Service and the pod names stay.
	r.StatefulSet, err = appsv1.NewStatefulSet(ctx, name, RenderStatefulSet(args), pulumi.Parent(r), deps, pulumi.DependsOn(args.PodDeps),
		meta.ReplaceOnChangesOf(replaceOn(args)))
	if err != nil {
		return nil, fmt.Errorf("ring %q: StatefulSet %q: %w", name, name, err)
	}
	if _, err := policyv1.NewPodDisruptionBudget(ctx, name, RenderDisruptionBudget(args), pulumi.Parent(r)); err != nil {
		return nil, fmt.Errorf("ring %q: PodDisruptionBudget %q: %w", name, name, err)
	}
	// The launcher's pod template is immutable: a new hostfile means a new Job, and the old one
	// (same name) must go first.
	r.Launcher, err = batchv1.NewJob(ctx, name+"-launcher", RenderLauncher(args), pulumi.Parent(r), deps, pulumi.DependsOn(args.PodDeps),
		pulumi.DependsOn(append([]pulumi.Resource{r.StatefulSet}, launcherDeps...)), pulumi.DeleteBeforeReplace(true))
	if err != nil {
		return nil, fmt.Errorf("ring %q: Job %q: %w", name, name+"-launcher", err)
	}
	r.HostnamePattern = HostnamePattern(args.Name, args.NamespaceDNS, args.Count)
	return r, meta.RegisterOutputs(ctx, r, pulumi.Map{"hostnamePattern": pulumi.String(r.HostnamePattern)})
}

// replaceOn are the towers' paths whose change replaces their StatefulSet: its pod spec and its
// queue label, and queued, its whole spec and annotations (meta.SetGang).
func replaceOn(a *Args) []string {
	if a.Queue != nil {
		return meta.QueuedSetReplaceOn
	}
	return append(append([]string{}, meta.PodSpec...), meta.QueueLabelPath)
}

// HostnamePattern is the towers' hostnames as one bash brace expansion,
// <name>-{0..N-1}.<name>.<namespace>.svc (`echo` it for the list): 1024 towers are not 1024 names
// in the state and the outputs.
func HostnamePattern(name, namespace string, towers int) string {
	if towers == 1 {
		return fmt.Sprintf("%s-0.%s.%s.svc", name, name, namespace)
	}
	return fmt.Sprintf("%s-{0..%d}.%s.%s.svc", name, towers-1, name, namespace)
}

// SSHSecretName is the name of the towers' ssh key Secret of the ring called name.
func SSHSecretName(name string) string { return name + "-ssh" }

// RenderSSHSecret derives the key pair from the seed. The result is a secret because the seed is.
func RenderSSHSecret(a *Args) *corev1.SecretArgs {
	keys := a.SSHKeySeed.ToStringOutput().ApplyT(func(seed string) (map[string]string, error) {
		priv, pub, err := DeriveSSHKey(seed, a.KeyBinding)
		if err != nil {
			return nil, fmt.Errorf("Secret %q: %w", SSHSecretName(a.Name), err)
		}
		return map[string]string{"id_ed25519": priv, "id_ed25519.pub": pub, "authorized_keys": pub}, nil
	}).(pulumi.StringMapOutput)
	return &corev1.SecretArgs{
		Metadata:   a.Labels.ObjectMeta(SSHSecretName(a.Name), a.Namespace, towerComponent),
		Type:       pulumi.String("Opaque"),
		StringData: pulumi.ToSecret(keys).(pulumi.StringMapOutput),
	}
}

// RenderScripts holds the hostfile, the sshd and launcher scripts, sshd's configuration and the ssh
// client config.
func RenderScripts(a *Args) *corev1.ConfigMapArgs {
	data := pulumi.StringMap{
		"hostfile":    pulumi.String(Hostfile(a.Count, a.Slots, a.Name, a.NamespaceDNS)),
		"sshd.sh":     pulumi.String(sshdScript),
		"sshd_config": pulumi.String(sshdConfig(a.RunAsUser, a.Fabric.Env)),
		"launcher.sh": pulumi.String(launcherScript),
		"ssh_config":  pulumi.String(sshConfig(a.SSHPort, a.RunAsUser)),
	}
	if a.releases() {
		data["release.py"] = pulumi.String(meta.ReleaseScript)
	}
	data["runstate.py"] = pulumi.String(runStateScript)
	return &corev1.ConfigMapArgs{Metadata: a.Labels.ObjectMeta(a.Name+"-scripts", a.Namespace, towerComponent), Data: data}
}

// RenderState is the run's state ConfigMap, empty until the launcher writes it: job (the
// launcher Job's uid), run, attempt, restarts, maxRestarts, phase (waiting, running, succeeded,
// failed), checkpointStep, reasons, updated.
func RenderState(a *Args) *corev1.ConfigMapArgs {
	return &corev1.ConfigMapArgs{Metadata: a.Labels.ObjectMeta(StateName(a.LauncherName), a.Namespace, launcherComponent)}
}

// RenderStateRole may read and patch the state ConfigMap, and nothing else.
func RenderStateRole(a *Args) *rbacv1.RoleArgs {
	return &rbacv1.RoleArgs{
		Metadata: a.Labels.ObjectMeta(StateName(a.LauncherName), a.Namespace, launcherComponent),
		Rules: rbacv1.PolicyRuleArray{rbacv1.PolicyRuleArgs{
			ApiGroups:     pulumi.StringArray{pulumi.String("")},
			Resources:     pulumi.StringArray{pulumi.String("configmaps")},
			ResourceNames: pulumi.StringArray{pulumi.String(StateName(a.LauncherName))},
			Verbs:         pulumi.StringArray{pulumi.String("get"), pulumi.String("patch")},
		}},
	}
}

// RenderStateRoleBinding gives RenderStateRole to the launcher's service account.
func RenderStateRoleBinding(a *Args) *rbacv1.RoleBindingArgs {
	return &rbacv1.RoleBindingArgs{
		Metadata: a.Labels.ObjectMeta(StateName(a.LauncherName), a.Namespace, launcherComponent),
		RoleRef: &rbacv1.RoleRefArgs{
			ApiGroup: pulumi.String("rbac.authorization.k8s.io"), Kind: pulumi.String("Role"), Name: pulumi.String(StateName(a.LauncherName)),
		},
		Subjects: rbacv1.SubjectArray{rbacv1.SubjectArgs{
			Kind: pulumi.String("ServiceAccount"), Name: pulumi.String(launcherAccount(a)), Namespace: a.Namespace,
		}},
	}
}

// RenderService is the headless Service that gives every tower its DNS name. Not-ready addresses
// are published so that the launcher can resolve a tower while it is still starting.
func RenderService(a *Args) *corev1.ServiceArgs {
	return a.Labels.HeadlessService(a.Name, a.Namespace, towerComponent, true, meta.Port{Name: "ssh", Port: a.SSHPort})
}

// RenderStatefulSet builds the towers. Pods start in parallel (OrderedReady takes 2.3× longer at
// 128 ranks), request their GPUs and tolerate the GPU taint (CPU towers do neither), select their
// pool and prefer one tower per node.
func RenderStatefulSet(a *Args) *appsv1.StatefulSetArgs {
	volumes, mounts := podVolumes(a)
	if a.RunAsUser != 0 {
		// sshd's host key and pid file, where a user other than root may write them.
		volumes = append(volumes, corev1.VolumeArgs{Name: pulumi.String("sshd"), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{
			SizeLimit: pulumi.String(sshdRunDirSize),
		}})
		mounts = append(mounts, corev1.VolumeMountArgs{Name: pulumi.String("sshd"), MountPath: pulumi.String(sshdRunDir)})
	}
	// The ranks' shared memory (NCCL, DataLoader workers): not the runtime's 64 MiB.
	volumes = append(volumes, meta.ShmVolume(a.ShmSize))
	mounts = append(mounts, meta.ShmMount())
	volumes = append(volumes, a.Resources.HugePagesVolumes()...) // towers.resources: hugetlbfs per size
	mounts = append(mounts, a.Resources.HugePagesMounts()...)
	containers := corev1.ContainerArray{corev1.ContainerArgs{
		Name:    pulumi.String(towerComponent),
		Image:   pulumi.String(a.Image),
		Command: pulumi.StringArray{pulumi.String("/bin/bash"), pulumi.String("/etc/kolotoc/scripts/sshd.sh")},
		// With these, mpirun from a tower's shell (gotoTower) runs over every tower as the
		// launcher does: `mpirun --hostfile $KOLOTOC_HOSTFILE …` (one rank per slot). Nothing
		// here may depend on the number of towers: a new count must stay an in-place scale, not
		// a new pod template (which replaces the ring, meta.PodSpec).
		Env: workloadEnv(a, corev1.EnvVarArray{
			corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_SSH_PORT"), Value: pulumi.String(fmt.Sprint(a.SSHPort))},
			env("KOLOTOC_HOSTFILE", TowerHostfilePath),
			env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
		}),
		Ports: corev1.ContainerPortArray{corev1.ContainerPortArgs{
			Name: pulumi.String("ssh"), ContainerPort: pulumi.Int(a.SSHPort),
		}},
		// sshd's port, every 2 s: `pulumi up` waits for the towers, and the probe after one that
		// came before sshd listened was 5 s away with the former period (2 of 10 measured ups of
		// dev, docs/measured.md). A tower is unready after 16 s of failures (was 15).
		ReadinessProbe: &corev1.ProbeArgs{
			TcpSocket:     &corev1.TCPSocketActionArgs{Port: pulumi.Int(a.SSHPort)},
			PeriodSeconds: pulumi.Int(2), FailureThreshold: pulumi.Int(8),
		},
		Resources:       towerResources(a),
		SecurityContext: towerSecurity(a),
		VolumeMounts:    mounts,
	}}
	for _, s := range a.Sidecars {
		containers = append(containers, s)
	}
	var tolerations corev1.TolerationArrayInput
	if a.GPUsPerTower > 0 {
		tolerations = corev1.TolerationArray{meta.GPUToleration()}
	}
	spec := &corev1.PodSpecArgs{
		SecurityContext:              meta.WorkloadSecurity(a.RunAsUser),
		NodeSelector:                 a.Labels.PoolSelector(a.Pool),
		ImagePullSecrets:             a.Labels.ImagePullSecrets(),
		Tolerations:                  tolerations,
		AutomountServiceAccountToken: pulumi.Bool(false),
		InitContainers:               a.Code.InitContainers(),
		Affinity:                     a.Labels.SpreadAcrossNodes(towerComponent),
		Containers:                   containers,
		Volumes:                      volumes,
		// SIGTERM to SIGKILL: the ranks' time to checkpoint (sshdScript passes SIGTERM on).
		TerminationGracePeriodSeconds: pulumi.Int(a.TerminationGracePeriodSeconds),
	}
	if a.HostNetwork {
		spec.HostNetwork = pulumi.Bool(true)
		spec.DnsPolicy = pulumi.String("ClusterFirstWithHostNet")
	}
	if a.ShareProcesses && len(a.Sidecars) > 0 {
		spec.ShareProcessNamespace = pulumi.Bool(true)
	}
	md := a.Labels.ObjectMeta(a.Name, a.Namespace, towerComponent)
	podLabels := a.Labels.PodLabels(towerComponent)
	if a.Queue != nil {
		// A queued ring may wait for admission for hours, its pods gated: `pulumi up` does not
		// wait for the towers' readiness (it would fail after awaitTimeout), the stack's outputs
		// say how to follow the admission (docs/queueing.md).
		md.Annotations.(pulumi.StringMap)[meta.SkipAwaitAnnotation] = pulumi.String("true")
		a.Queue.MarkSet(md)
		a.Queue.Labels(podLabels)
	}
	if a.releases() && a.Run != "" {
		// The launcher scales the towers to zero when its run succeeds; a new run changes this
		// annotation, and the update that follows brings the towers back.
		md.Annotations.(pulumi.StringMap)[meta.RunLabel] = pulumi.String(a.Run)
	}
	replicas := a.Count
	if a.Suspend {
		replicas = 0
	}
	return &appsv1.StatefulSetArgs{
		Metadata: md,
		Spec: &appsv1.StatefulSetSpecArgs{
			Replicas:            pulumi.Int(replicas),
			ServiceName:         pulumi.String(a.Name),
			PodManagementPolicy: pulumi.String("Parallel"),
			Selector:            &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(towerComponent))},
			Template:            &corev1.PodTemplateSpecArgs{Metadata: podMeta(podLabels, a.Labels.KeepNode(a.Pool, nil)), Spec: spec},
		},
	}
}

// RenderDisruptionBudget lets voluntary disruptions (a drain, the autoscaler's scale-down, a
// node upgrade) evict one tower at a time when the run restarts from its checkpoint
// (towers.maxRestarts > 0): the tower gets its grace period to checkpoint, and the run goes on
// on its replacement. Without restarts an MPI ring is rigid, the run ends with any of its
// ranks, and no tower may be evicted.
func RenderDisruptionBudget(a *Args) *policyv1.PodDisruptionBudgetArgs {
	if a.MaxRestarts > 0 {
		return a.Labels.DisruptionBudget(a.Name, a.Namespace, towerComponent, 1)
	}
	return a.Labels.DisruptionBudget(a.Name, a.Namespace, towerComponent, 0)
}

// hostfilePath is where the launcher writes the hostfile: a path its user may write.
func hostfilePath(a *Args) string {
	if a.RunAsUser != 0 {
		return userHostfilePath
	}
	return rootHostfilePath
}

// waitSeconds is how long the launcher waits for the towers.
func waitSeconds(a *Args) int {
	if a.WaitSeconds > 0 {
		return a.WaitSeconds
	}
	return launcherWaitSeconds
}

// RenderLauncher builds the launcher Job. `pulumi up` does not wait for it to finish
// (pulumi.com/skipAwait): a training run lasts hours. The hostfile's hash in the pod template
// makes a change of towers or slots start a new launcher, and so does a new run id. Suspended,
// the Job keeps no pod; resumed, it starts its run again.
func RenderLauncher(a *Args) *batchv1.JobArgs {
	volumes, mounts := podVolumes(a)
	hash := sha256.Sum256([]byte(Hostfile(a.Count, a.Slots, a.Name, a.NamespaceDNS)))
	args := pulumi.StringArray{}
	for _, c := range a.Command {
		args = append(args, pulumi.String(c))
	}
	md := a.Labels.ObjectMeta(a.LauncherName, a.Namespace, launcherComponent)
	md.Annotations.(pulumi.StringMap)[meta.SkipAwaitAnnotation] = pulumi.String("true")
	// A new launcher replaces the old one under the same name, and skipAwait also skips the wait
	// for the old one's deletion. With the default (foreground) propagation the old Job lingers
	// until its pod has terminated (mpirun takes its grace period), and creating the new one
	// fails on the lingering Job ("spec.template: field is immutable"). In the background the Job
	// goes at once and its pod follows.
	md.Annotations.(pulumi.StringMap)["pulumi.com/deletionPropagationPolicy"] = pulumi.String("background")
	podLabels := a.Labels.PodLabels(launcherComponent)
	envs := corev1.EnvVarArray{
		env("KOLOTOC_NP", fmt.Sprint(a.Count*a.Slots)),
		env("KOLOTOC_HOSTFILE", hostfilePath(a)),
		env("KOLOTOC_SSH_PORT", fmt.Sprint(a.SSHPort)),
		env("KOLOTOC_WAIT_SECONDS", fmt.Sprint(waitSeconds(a))),
		// Queued, the towers may wait for admission (and their nodes) for hours: the launcher
		// waits for them without a deadline (launcherScript).
		env("KOLOTOC_QUEUED", fmt.Sprint(a.Queue != nil)),
		// Open MPI cuts hostfile names at the first dot and then ssh-es to
		// "tower-0", which no pod can resolve: only the full
		// <pod>.<service>.<namespace>.svc name exists in cluster DNS.
		env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
		// The restarts (launcherScript) and their state, keyed by this Job's uid.
		env("KOLOTOC_MAX_RESTARTS", fmt.Sprint(a.MaxRestarts)),
		env("KOLOTOC_STATE", StateName(a.LauncherName)),
		corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_LAUNCHER_UID"), ValueFrom: &corev1.EnvVarSourceArgs{
			FieldRef: &corev1.ObjectFieldSelectorArgs{FieldPath: pulumi.String("metadata.labels['batch.kubernetes.io/controller-uid']")},
		}},
	}
	// The contract (meta/contract.go): the run's checkpoint directory and id; the launcher sets
	// KOLOTOC_ATTEMPT for each attempt.
	envs = append(envs, meta.ContractEnv(a.CheckpointDir, a.RunID())...)
	if a.Run != "" {
		md.Labels.(pulumi.StringMap)[meta.RunLabel] = pulumi.String(a.Run)
		podLabels[meta.RunLabel] = a.Run
		envs = append(envs, env("KOLOTOC_RUN", a.Run))
	}
	spec := &corev1.PodSpecArgs{
		SecurityContext:  meta.WorkloadSecurity(a.RunAsUser),
		RestartPolicy:    pulumi.String("Never"),
		NodeSelector:     a.Labels.PoolSelector(a.LauncherPool),
		ImagePullSecrets: a.Labels.ImagePullSecrets(),
		// The run's one coordinator: a spot node reclaimed under it ends the run.
		Affinity:                     &corev1.AffinityArgs{NodeAffinity: meta.NotOnSpot()},
		AutomountServiceAccountToken: pulumi.Bool(false),
		InitContainers:               a.Code.InitContainers(),
		Volumes:                      volumes,
		// SIGTERM to SIGKILL: mpirun passes SIGTERM to the ranks, which checkpoint.
		TerminationGracePeriodSeconds: pulumi.Int(a.TerminationGracePeriodSeconds),
		// Its token may patch the run's state (RenderStateRole) and, releasing, scale the towers
		// (meta.NewReleaser), nothing else. It is mounted into the launcher container only, not
		// the code clone before it.
		ServiceAccountName: pulumi.String(launcherAccount(a)),
	}
	spec.Volumes = append(volumes, meta.ReleaseTokenVolume())
	mounts = append(mounts, meta.ReleaseTokenMount())
	if a.releases() {
		envs = append(envs, env("KOLOTOC_ON_SUCCESS", meta.OnSuccessRelease), env("KOLOTOC_RELEASE", a.Name))
	}
	spec.Containers = corev1.ContainerArray{corev1.ContainerArgs{
		Name:      pulumi.String(launcherComponent),
		Image:     pulumi.String(a.LauncherImage),
		Command:   pulumi.StringArray{pulumi.String("/bin/bash"), pulumi.String("/etc/kolotoc/scripts/launcher.sh")},
		Args:      args,
		Env:       append(workloadEnv(a, envs), meta.EnvArray(a.LauncherEnv)...),
		Resources: launcherResources(a),
		// The launcher, an ssh client and mpirun, needs no capability, nor to gain one.
		SecurityContext: meta.LockedDown(),
		VolumeMounts:    mounts,
	}}
	jobSpec := &batchv1.JobSpecArgs{
		BackoffLimit: pulumi.Int(launcherBackoffLimit),
		// Kubernetes "Handling retriable and non-retriable pod failures with Pod failure policy":
		// a launcher pod disrupted (evicted, preempted, its node gone: condition DisruptionTarget)
		// is not a failure, and the next pod takes the run's attempts up where they were; a run
		// failed for good (runFailedExit) fails the Job at once, not in a new pod from attempt 0.
		PodFailurePolicy: &batchv1.PodFailurePolicyArgs{Rules: batchv1.PodFailurePolicyRuleArray{
			batchv1.PodFailurePolicyRuleArgs{
				Action: pulumi.String("Ignore"),
				OnPodConditions: batchv1.PodFailurePolicyOnPodConditionsPatternArray{batchv1.PodFailurePolicyOnPodConditionsPatternArgs{
					Type: pulumi.String("DisruptionTarget"), Status: pulumi.String("True"),
				}},
			},
			batchv1.PodFailurePolicyRuleArgs{
				Action: pulumi.String("FailJob"),
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirementArgs{
					ContainerName: pulumi.String(launcherComponent), Operator: pulumi.String("In"), Values: pulumi.IntArray{pulumi.Int(runFailedExit)},
				},
			},
		}},
		Template: &corev1.PodTemplateSpecArgs{
			Metadata: podMeta(podLabels, a.Labels.KeepNode(a.LauncherPool, map[string]string{"kolotoc.dev/hostfile-sha256": hex.EncodeToString(hash[:])})),
			Spec:     spec,
		},
	}
	if a.Suspend {
		jobSpec.Suspend = pulumi.Bool(true)
	}
	return &batchv1.JobArgs{Metadata: md, Spec: jobSpec}
}

// podMeta is a pod template's metadata: its labels and annotations (none: nil).
func podMeta(labels, annotations map[string]string) *metav1.ObjectMetaArgs {
	md := &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(labels)}
	if annotations != nil {
		md.Annotations = pulumi.ToStringMap(annotations)
	}
	return md
}

// workloadEnv is Kolotoc's own variables, the fabric's, then where the code is, then the stack's.
func workloadEnv(a *Args, own corev1.EnvVarArray) corev1.EnvVarArray {
	own = append(own, a.Fabric.EnvArray()...)
	own = append(own, a.Code.Env()...)
	return append(own, meta.EnvArray(a.Env)...)
}

// towerResources requests the tower's CPU, memory and GPUs (a CPU tower requests no GPU), its
// fabric's devices, and what towers.resources adds.
func towerResources(a *Args) *corev1.ResourceRequirementsArgs {
	requests := pulumi.StringMap{"cpu": pulumi.String(a.CPU), "memory": pulumi.String(a.Memory)}
	limits := pulumi.StringMap{"cpu": pulumi.String(cpuLimit(a)), "memory": pulumi.String(a.Memory)}
	if a.GPUsPerTower > 0 {
		requests[meta.GPUResource] = pulumi.String(fmt.Sprint(a.GPUsPerTower))
		limits[meta.GPUResource] = pulumi.String(fmt.Sprint(a.GPUsPerTower))
	}
	a.Fabric.AddTo(requests, limits)    // EFA interfaces and their huge pages
	a.Resources.AddTo(requests, limits) // towers.resources: RDMA devices, huge pages, …
	return &corev1.ResourceRequirementsArgs{Requests: requests, Limits: limits}
}

// launcherResources requests the launcher's CPU and memory; its limits are launcherCPULimit and
// launcherMemoryLimit, or the request when that is larger.
func launcherResources(a *Args) *corev1.ResourceRequirementsArgs {
	cpu, mem := a.LauncherCPU, a.LauncherMemory
	return &corev1.ResourceRequirementsArgs{
		Requests: pulumi.StringMap{"cpu": pulumi.String(cpu), "memory": pulumi.String(mem)},
		Limits: pulumi.StringMap{
			"cpu": pulumi.String(atLeast(launcherCPULimit, cpu)), "memory": pulumi.String(atLeast(launcherMemoryLimit, mem)),
		},
	}
}

// atLeast returns limit, or request when request is the larger quantity (a limit below the
// request is refused by the API server).
func atLeast(limit, request string) string {
	l, errL := resource.ParseQuantity(limit)
	r, errR := resource.ParseQuantity(request)
	if errL == nil && errR == nil && r.Cmp(l) > 0 {
		return request
	}
	return limit
}

func cpuLimit(a *Args) string {
	if a.CPULimit != "" {
		return a.CPULimit
	}
	return a.CPU
}

func env(name, value string) corev1.EnvVarArgs {
	return corev1.EnvVarArgs{Name: pulumi.String(name), Value: pulumi.String(value)}
}

// podVolumes are the volumes of towers and launcher: the ssh key (0600), the scripts, the shared
// claim and scratch.
func podVolumes(a *Args) (corev1.VolumeArray, corev1.VolumeMountArray) {
	volumes := corev1.VolumeArray{
		corev1.VolumeArgs{Name: pulumi.String("ssh"), Secret: &corev1.SecretVolumeSourceArgs{
			SecretName: pulumi.String(SSHSecretName(a.Name)), DefaultMode: pulumi.Int(sshKeyMode),
		}},
		corev1.VolumeArgs{Name: pulumi.String("scripts"), ConfigMap: &corev1.ConfigMapVolumeSourceArgs{
			Name: pulumi.String(a.Name + "-scripts"),
		}},
	}
	volumes = append(volumes, a.SharedVolumes()...)
	mounts := corev1.VolumeMountArray{
		corev1.VolumeMountArgs{Name: pulumi.String("ssh"), MountPath: pulumi.String("/etc/kolotoc/ssh"), ReadOnly: pulumi.Bool(true)},
		corev1.VolumeMountArgs{Name: pulumi.String("scripts"), MountPath: pulumi.String("/etc/kolotoc/scripts"), ReadOnly: pulumi.Bool(true)},
	}
	mounts = append(mounts, a.SharedMounts()...)
	volumes = append(volumes, a.Code.Volumes()...)
	mounts = append(mounts, a.Code.Mounts()...)
	return volumes, mounts
}
