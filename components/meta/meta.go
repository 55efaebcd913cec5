// Package meta holds what every Kolotoc component stamps on its Kubernetes objects: the
// app.kubernetes.io labels, the pool selector, the GPU taint and its toleration.
package meta

import (
	"sort"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

const (
	// PartOf is app.kubernetes.io/part-of and app.kubernetes.io/name of every object.
	PartOf = "kolotoc"
	// PoolLabel marks every node with its Kolotoc pool; workloads select their pool by it.
	PoolLabel = "kolotoc.dev/pool"
	// ClusterLabel marks simulated nodes with their stack's cluster name: several stacks share
	// the one local cluster, and a pool named "gpu" in one must not take the pods of another.
	ClusterLabel = "kolotoc.dev/cluster"
	// RealNodeLabel marks the local cluster's real node(s) (kubelet + containerd, not kwok): a
	// pool declared `real: true` is those nodes, registers no Node of its own, and its workloads
	// select them by this label alone (value RealNodeValue).
	RealNodeLabel = "kolotoc.dev/real-node"
	RealNodeValue = "true"
	// GPUResource is the extended resource the NVIDIA device plugin advertises.
	GPUResource = "nvidia.com/gpu"
	// GPUTaintKey, GPUTaintValue, GPUTaintEffect: the taint every GPU pool carries, so that only
	// pods that asked for GPUs land on GPU nodes (nvidia.com/gpu=present:NoSchedule).
	GPUTaintKey    = "nvidia.com/gpu"
	GPUTaintValue  = "present"
	GPUTaintEffect = "NoSchedule"
	// GPUPresentLabel is set on GPU nodes (as NVIDIA's GPU feature discovery does); the device
	// plugin selects on it.
	GPUPresentLabel = "nvidia.com/gpu.present"
	// GPUProductLabel names the GPU type of a node.
	GPUProductLabel = "nvidia.com/gpu.product"
)

// SpotLabels are the labels each cloud puts on its spot/preemptible nodes (GKE Spot VMs, EKS
// managed node groups with SPOT capacity, AKS Spot priority), label key to value. The clouds set
// them themselves (and reserve their prefixes); simulated spot pools carry their cloud's.
var SpotLabels = map[string]string{
	"cloud.google.com/gke-spot":             "true",
	"eks.amazonaws.com/capacityType":        "SPOT",
	"kubernetes.azure.com/scalesetpriority": "spot",
}

// NotOnSpot is a node affinity that keeps a pod off every cloud's spot nodes (a node without the
// labels is fine), for a pod whose loss ends more than itself.
func NotOnSpot() *corev1.NodeAffinityArgs {
	var exprs corev1.NodeSelectorRequirementArray
	for _, k := range SortedKeys(SpotLabels) {
		exprs = append(exprs, corev1.NodeSelectorRequirementArgs{
			Key: pulumi.String(k), Operator: pulumi.String("NotIn"), Values: pulumi.StringArray{pulumi.String(SpotLabels[k])},
		})
	}
	return &corev1.NodeAffinityArgs{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelectorArgs{
			NodeSelectorTerms: corev1.NodeSelectorTermArray{corev1.NodeSelectorTermArgs{MatchExpressions: exprs}},
		},
	}
}

// Labels builds the app.kubernetes.io labels of one stack's objects.
type Labels struct {
	Instance string // app.kubernetes.io/instance: the stack name
	Version  string // app.kubernetes.io/version: the program's version
	Cluster  string // when set (simulated cloud), pools are selected within this cluster's nodes only
	// RealPools names the pools that are the local cluster's real nodes (simulated cloud, pools
	// with real: true); they are selected by RealNodeLabel instead of pool and cluster labels.
	RealPools map[string]bool
	// AutoscaledPools names the pools whose nodes an autoscaler adds and removes (minNodes below
	// maxNodes); the training pods placed on them carry KeepNodeAnnotations (KeepNode).
	AutoscaledPools map[string]bool
	// PullSecrets names the image pull Secrets every pod of the stack references (kolotoc:registries);
	// each namespace with Kolotoc pods holds them. Empty: no imagePullSecrets.
	PullSecrets []string
}

// ImagePullSecrets is every pod's imagePullSecrets: the stack's registry credentials, or nil (the
// field left out) when the stack names no registry. Every pod spec Kolotoc renders sets it, so a
// private image pulls wherever Kolotoc runs it.
func (l Labels) ImagePullSecrets() corev1.LocalObjectReferenceArrayInput {
	if len(l.PullSecrets) == 0 {
		return nil
	}
	refs := make(corev1.LocalObjectReferenceArray, len(l.PullSecrets))
	for i, name := range l.PullSecrets {
		refs[i] = corev1.LocalObjectReferenceArgs{Name: pulumi.String(name)}
	}
	return refs
}

// For returns every label of an object of the given component.
func (l Labels) For(component string) map[string]string {
	m := l.Selector(component)
	m["app.kubernetes.io/part-of"] = PartOf
	m["app.kubernetes.io/version"] = l.Version
	m["app.kubernetes.io/managed-by"] = "pulumi"
	return m
}

// PodLabels returns the labels of a component's pod template: every label of For but the version.
// A label on a pod template is part of the template, so a version label there would restart every
// tower, worker and file server at each Kolotoc upgrade, killing the training runs and erasing
// the in-cluster NFS server's data; the version stays on the controllers themselves.
func (l Labels) PodLabels(component string) map[string]string {
	m := l.For(component)
	delete(m, "app.kubernetes.io/version")
	return m
}

// Selector returns the labels that select a component's pods. The version is left out: selectors
// are immutable, and an upgrade must roll pods, not replace their controllers.
func (l Labels) Selector(component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      PartOf,
		"app.kubernetes.io/instance":  l.Instance,
		"app.kubernetes.io/component": component,
	}
}

// PatchForceAnnotation makes the Kubernetes provider take back fields another manager changed by
// hand (`kubectl scale`, `kubectl edit`): Kolotoc owns these objects, and after `pulumi refresh`
// shows such drift the next `pulumi up` restores the declared value instead of failing on a
// server-side apply conflict.
const PatchForceAnnotation = "pulumi.com/patchForce"

// SkipAwaitAnnotation makes the Kubernetes provider apply an object without waiting for its
// readiness (and, for workloads, its deletion).
const SkipAwaitAnnotation = "pulumi.com/skipAwait"

// WaitForAnnotation replaces the provider's readiness wait with conditions of the object's own
// ("condition=Ready"): how the simulated node pools are awaited.
const WaitForAnnotation = "pulumi.com/waitFor"

// ServiceMeta is the metadata of an in-cluster (ClusterIP) Service in front of the pods of a
// workload the provider awaits: the Service itself is not awaited (pulumi.com/skipAwait). An
// awaited Service is ready only 10 s after its endpoints last changed (the provider lets them
// settle), and those 10 s ended every first deployment; its other check, that it selects ready
// pods, is the awaited workload's readiness and a test that every such Service's selector
// matches that workload's pod labels (tests: TestInClusterServicesNotAwaited). A LoadBalancer is
// awaited: its address is an output.
func (l Labels) ServiceMeta(name string, namespace pulumi.StringInput, component string) *metav1.ObjectMetaArgs {
	md := l.ObjectMeta(name, namespace, component)
	md.Annotations.(pulumi.StringMap)[SkipAwaitAnnotation] = pulumi.String("true")
	return md
}

// ObjectMeta is the metadata of a namespaced object named name.
func (l Labels) ObjectMeta(name string, namespace pulumi.StringInput, component string) *metav1.ObjectMetaArgs {
	return &metav1.ObjectMetaArgs{
		Name:        pulumi.String(name),
		Namespace:   namespace,
		Labels:      pulumi.ToStringMap(l.For(component)),
		Annotations: pulumi.StringMap{PatchForceAnnotation: pulumi.String("true")},
	}
}

// GPUNodeSelector selects every GPU node (of this stack's cluster, on the simulated cloud), for
// the per-node GPU agents: the device plugin and the DCGM exporter.
func (l Labels) GPUNodeSelector() pulumi.StringMap {
	sel := pulumi.StringMap{GPUPresentLabel: pulumi.String("true")}
	if l.Cluster != "" {
		sel[ClusterLabel] = pulumi.String(l.Cluster)
	}
	return sel
}

// Port is a named Service port whose target port is the same number.
type Port struct {
	Name string
	Port int
}

// HeadlessService renders the headless Service that gives a StatefulSet's pods their DNS names
// (<pod>.<name>.<namespace>.svc). publishNotReady publishes pods before they are ready, for
// peers that must find each other in order to start (MPI ranks, etcd members, TF tasks).
func (l Labels) HeadlessService(name string, namespace pulumi.StringInput, component string, publishNotReady bool, ports ...Port) *corev1.ServiceArgs {
	spec := &corev1.ServiceSpecArgs{
		ClusterIP: pulumi.String("None"),
		Selector:  pulumi.ToStringMap(l.Selector(component)),
	}
	if publishNotReady {
		spec.PublishNotReadyAddresses = pulumi.Bool(true)
	}
	var sp corev1.ServicePortArray
	for _, p := range ports {
		sp = append(sp, corev1.ServicePortArgs{Name: pulumi.String(p.Name), Port: pulumi.Int(p.Port), TargetPort: pulumi.Int(p.Port)})
	}
	spec.Ports = sp
	return &corev1.ServiceArgs{Metadata: l.ObjectMeta(name, namespace, component), Spec: spec}
}

// DisruptionBudget renders the PodDisruptionBudget of a component's pods: voluntary disruptions
// (node drains, the cluster autoscaler's scale-down, a cloud's node auto-upgrades, all of which
// evict through the Eviction API) take at most maxUnavailable of them at a time; 0 takes none
// while they run. Deletions (a rollout, `kubectl delete pod`, scaling down) are not evictions
// and are not held. Pods that are not Ready may always be evicted: a budget of 0 would otherwise
// hold a drain for good behind a pod that serves no run.
func (l Labels) DisruptionBudget(name string, namespace pulumi.StringInput, component string, maxUnavailable int) *policyv1.PodDisruptionBudgetArgs {
	return &policyv1.PodDisruptionBudgetArgs{
		Metadata: l.ObjectMeta(name, namespace, component),
		Spec: &policyv1.PodDisruptionBudgetSpecArgs{
			MaxUnavailable:             pulumi.Int(maxUnavailable),
			Selector:                   &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(l.Selector(component))},
			UnhealthyPodEvictionPolicy: pulumi.String(UnhealthyPodsEvictable),
		},
	}
}

// UnhealthyPodsEvictable is the budgets' unhealthyPodEvictionPolicy: a pod that is not Ready
// can be evicted whatever the budget says.
const UnhealthyPodsEvictable = "AlwaysAllow"

// PodSecurity is the security context of every Kolotoc pod: the container runtime's default
// seccomp profile, which blocks the system calls containers have no use for (Pod Security
// "restricted" asks for it; without it a pod runs unconfined). runAsUser, when not 0, runs every
// container of the pod as that user, not root (runAsNonRoot: the kubelet refuses to
// start a container that would run as root anyway), and makes the pod's volumes writable by it.
func PodSecurity(runAsUser int) *corev1.PodSecurityContextArgs {
	sc := &corev1.PodSecurityContextArgs{
		SeccompProfile: &corev1.SeccompProfileArgs{Type: pulumi.String("RuntimeDefault")},
	}
	if runAsUser != 0 {
		sc.RunAsNonRoot = pulumi.Bool(true)
		sc.RunAsUser = pulumi.Int(runAsUser)
		sc.FsGroup = pulumi.Int(runAsUser)
	}
	return sc
}

// WorkloadSecurity is the security context of a training pod (towers, launcher, Dask workers,
// elastic and TF workers, Jupyter): PodSecurity's, and with runAsUser (kolotoc:runAsUser) not
// 0, every container runs as that user and as the group of the same number, and the pod's
// volumes that support it are group-writable by it (fsGroup). 0 keeps the image's own user.
func WorkloadSecurity(runAsUser int) *corev1.PodSecurityContextArgs {
	sc := PodSecurity(runAsUser)
	if runAsUser != 0 {
		sc.RunAsGroup = pulumi.Int(runAsUser)
	}
	return sc
}

// LockedDown is the security context of every Kolotoc container: every capability dropped and
// none to gain (no setuid binaries, no file capabilities). add names the capabilities a container
// cannot do without (the towers' sshd), added back after the drop.
func LockedDown(add ...string) *corev1.SecurityContextArgs {
	caps := &corev1.CapabilitiesArgs{Drop: pulumi.StringArray{pulumi.String("ALL")}}
	if len(add) > 0 {
		caps.Add = pulumi.ToStringArray(add)
	}
	return &corev1.SecurityContextArgs{AllowPrivilegeEscalation: pulumi.Bool(false), Capabilities: caps}
}

// LockedDownAs is LockedDown for a container that runs as uid (and its group), never as root.
func LockedDownAs(uid int) *corev1.SecurityContextArgs {
	sc := LockedDown()
	sc.RunAsNonRoot, sc.RunAsUser, sc.RunAsGroup = pulumi.Bool(true), pulumi.Int(uid), pulumi.Int(uid)
	return sc
}

// SpreadAcrossNodes prefers to place a component's pods on different nodes, where the pool allows
// it: one node's loss then costs one pod (a tower, a worker, an etcd member), not several.
func (l Labels) SpreadAcrossNodes(component string) *corev1.AffinityArgs {
	return &corev1.AffinityArgs{PodAntiAffinity: &corev1.PodAntiAffinityArgs{
		PreferredDuringSchedulingIgnoredDuringExecution: corev1.WeightedPodAffinityTermArray{corev1.WeightedPodAffinityTermArgs{
			Weight: pulumi.Int(100),
			PodAffinityTerm: &corev1.PodAffinityTermArgs{
				TopologyKey:   pulumi.String("kubernetes.io/hostname"),
				LabelSelector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(l.Selector(component))},
			},
		}},
	}}
}

// GPUToleration tolerates the GPU taint.
func GPUToleration() corev1.TolerationArgs {
	return corev1.TolerationArgs{
		Key:      pulumi.String(GPUTaintKey),
		Operator: pulumi.String("Equal"),
		Value:    pulumi.String(GPUTaintValue),
		Effect:   pulumi.String(GPUTaintEffect),
	}
}

// Annotations that keep an autoscaler from taking a running pod's node: Karpenter's
// (https://karpenter.sh/docs/concepts/disruption/#pod-level-controls: consolidation and drift leave
// the node alone) and the cluster autoscaler's, which GKE and AKS run
// (https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/FAQ.md#what-types-of-pods-can-prevent-ca-from-removing-a-node).
const (
	DoNotDisruptAnnotation = "karpenter.sh/do-not-disrupt"
	SafeToEvictAnnotation  = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// KeepNodeAnnotations are both, as a training pod that must not lose its node mid-run carries them,
// so that one pod template holds on any cloud.
var KeepNodeAnnotations = map[string]string{DoNotDisruptAnnotation: "true", SafeToEvictAnnotation: "false"}

// KeepNode adds KeepNodeAnnotations to a pod template's annotations when its pool is autoscaled,
// and returns them (a new map when annotations is nil and there is something to add; nil stays
// nil otherwise, so that the pods of a fixed pool keep the template they had).
func (l Labels) KeepNode(pool string, annotations map[string]string) map[string]string {
	if !l.AutoscaledPools[pool] {
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k, v := range KeepNodeAnnotations {
		annotations[k] = v
	}
	return annotations
}

// PoolSelector selects the nodes of one pool (of this stack's cluster, on the simulated cloud),
// or, for a real pool, the local cluster's real nodes: they carry no pool or cluster label.
func (l Labels) PoolSelector(pool string) pulumi.StringMap {
	if l.RealPools[pool] {
		return pulumi.StringMap{RealNodeLabel: pulumi.String(RealNodeValue)}
	}
	sel := pulumi.StringMap{PoolLabel: pulumi.String(pool)}
	if l.Cluster != "" {
		sel[ClusterLabel] = pulumi.String(l.Cluster)
	}
	return sel
}

// SortedKeys returns a map's keys in order, so that rendered lists never depend on map order.
func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// OrUnset is a setting's value as a problem or a note shows it: "(unset)" when empty.
func OrUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// Problems collects what is wrong with a stack's configuration: each problem with its full key
// (towers.sshPort), the bad value and what is allowed. The stack reports them all at once, before
// anything is registered; a component's config section adds its own.
type Problems interface {
	Add(key, value, msg string)
}
