package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kolotoc/components/cluster/simapi"
)

// Labels and resources of the program's simulated nodes (components/meta, components/cluster).
const (
	poolLabel          = "kolotoc.dev/pool"
	zoneLabel          = "topology.kubernetes.io/zone"
	fabricLabel        = "kolotoc.dev/fabric"    // components/fabric.Label
	efaResource        = "vpc.amazonaws.com/efa" // components/fabric.EFAResource
	clusterLabel       = "kolotoc.dev/cluster"
	capacityAnnotation = simapi.CapacityAnnotation
	gpuResource        = corev1.ResourceName("nvidia.com/gpu")
)

// connect returns a client of the local cluster, or an error saying it is not up.
func connect(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, err
	}
	return kube, nil
}

// poolsServed checks that the cluster serves the simulated node pools' kind, which the pool
// controller (testbed/cluster/simpool, started by testbed/cluster/cluster.sh) installs: without it
// the mirror's pools could not be made, or would never have nodes.
func poolsServed(kube *kubernetes.Clientset) error {
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(simapi.APIVersion); err != nil {
		return fmt.Errorf("the local cluster does not serve %s (%v): its node-pool controller, simpool, has not run on it.\n"+
			"Start it with `make cluster` (testbed/cluster/cluster.sh up starts simpool on a running cluster too), then run make fit again", simapi.CRDName, err)
	}
	return nil
}

// karpenterAPI is the API of Karpenter's NodePool (components/cluster.KarpenterAPIVersion).
const karpenterAPI = "karpenter.sh/v1"

// karpenterServed checks that the cluster serves Karpenter's NodePool, which the local cluster's
// Karpenter installs (testbed/cluster/cluster.sh start_karpenter): without it a pool at zero
// could not be made, or would never grow.
func karpenterServed(kube *kubernetes.Clientset, pools map[string]bool) error {
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(karpenterAPI); err != nil {
		names := slices.Sorted(maps.Keys(pools))
		return fmt.Errorf("pool(s) %s sit at zero (minNodes: 0), which Karpenter grows, and the local cluster does not serve %s (%v): its Karpenter has not run on it.\n"+
			"Build it (testbed/tools/tools.sh karpenter) and start the cluster with it (make cluster, KOLOTOC_KARPENTER=1, the default), then run make fit again",
			strings.Join(names, ", "), karpenterAPI, err)
	}
	return nil
}

// decided: the scheduler placed the pod, or said why it cannot; or Kueue holds it (its
// admission gate): the scheduler will not look at it until the queue admits its group. A pod of a
// pool at zero that the scheduler cannot place yet waits for Karpenter, which makes its node or
// says why not (karpenterRefusals); the snapshot's decided asks that too.
func decided(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || queueHeld(p) {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// queueHeld: Kueue's admission gate holds the pod (kolotoc:queue, docs/queueing.md).
func queueHeld(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == kueueAdmissionGate {
			return true
		}
	}
	return false
}

const kueueAdmissionGate = "kueue.x-k8s.io/admission"

// queueAdmissions reads the Kueue Workloads of the mirror's namespaces: was each queued
// workload admitted, and if not, what Kueue says (none when the stack has no queue, or the
// cluster no Kueue).
func queueAdmissions(ctx context.Context, kube *kubernetes.Clientset, namespaces []string) []Admission {
	var out []Admission
	for _, ns := range namespaces {
		raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/apis/kueue.x-k8s.io/v1beta2/namespaces", ns, "workloads").DoRaw(ctx)
		if err != nil {
			continue
		}
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
				Spec     struct{ QueueName string }
				Status   struct {
					Admission  *struct{ ClusterQueue string }
					Conditions []struct{ Type, Status, Message string }
				}
			}
		}
		if json.Unmarshal(raw, &list) != nil {
			continue
		}
		for _, w := range list.Items {
			a := Admission{Workload: w.Metadata.Name, Queue: w.Spec.QueueName}
			if w.Status.Admission != nil {
				a.ClusterQueue = w.Status.Admission.ClusterQueue
			}
			for _, c := range w.Status.Conditions {
				switch {
				case c.Type == "Admitted" && c.Status == "True":
					a.Admitted = true
				case c.Type == "QuotaReserved" && c.Status == "False":
					a.Message = c.Message
				}
			}
			out = append(out, a)
		}
	}
	return out
}

// workloadOf names a pod's controller, Kind/name; a Deployment's pods through their ReplicaSet.
func workloadOf(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		if o.Kind == "ReplicaSet" {
			if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(o.Name, "-"+h) {
				return "Deployment/" + strings.TrimSuffix(o.Name, "-"+h)
			}
		}
		return o.Kind + "/" + o.Name
	}
	return "Pod/" + p.Name
}

// snapshot is the mirror's pods and controllers at one moment.
type snapshot struct {
	pods    []corev1.Pod
	missing []Missing
	// fromZero: the pools at zero, whose nodes Karpenter makes; refused: Karpenter's last word on
	// each pod it could not place (namespace/name → its message).
	fromZero map[string]bool
	refused  map[string]string
}

// decided: decided(p), and for a pod of a pool at zero that no node holds yet, Karpenter has said
// it cannot place it: until then it is making the pod's node, or about to (it batches the
// Pending pods of up to ten seconds).
func (s snapshot) decided(p *corev1.Pod) bool {
	if !decided(p) {
		return false
	}
	if p.Spec.NodeName != "" || queueHeld(p) || !s.fromZero[p.Spec.NodeSelector[poolLabel]] {
		return true
	}
	_, ok := s.refused[p.Namespace+"/"+p.Name]
	return ok
}

// complete: every controller has created its pods and the scheduler (with Karpenter, for the
// pools at zero) has decided every one.
func (s snapshot) complete() bool {
	if len(s.missing) > 0 || len(s.pods) == 0 {
		return false
	}
	for i := range s.pods {
		if !s.decided(&s.pods[i]) {
			return false
		}
	}
	return true
}

// karpenterApp is the component Karpenter's events come from (sigs.k8s.io/karpenter
// pkg/operator: AppName); karpenterFailed the reason of its event for a pod it cannot place and
// karpenterNominated the one for a pod it has found or made a node for (pkg/events/reason.go,
// pkg/controllers/provisioning/scheduling/events.go).
const (
	karpenterApp       = "karpenter"
	karpenterFailed    = "FailedScheduling"
	karpenterNominated = "Nominated"
)

// karpenterRefusals reads Karpenter's events on the pods of the namespaces and returns, for each
// pod whose latest Karpenter event says it cannot be placed, that event's message.
func karpenterRefusals(ctx context.Context, kube *kubernetes.Clientset, namespaces []string) (map[string]string, error) {
	var events []corev1.Event
	for _, ns := range namespaces {
		list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
		if err != nil {
			return nil, err
		}
		events = append(events, list.Items...)
	}
	return latestRefusals(events), nil
}

// latestRefusals: per pod (namespace/name), the message of Karpenter's latest event when that
// event is its refusal (a later nomination means it found the pod a node after all).
func latestRefusals(events []corev1.Event) map[string]string {
	type last struct {
		at          time.Time
		reason, msg string
	}
	latest := map[string]last{}
	for _, e := range events {
		if e.Source.Component != karpenterApp && e.ReportingController != karpenterApp {
			continue
		}
		if e.Reason != karpenterFailed && e.Reason != karpenterNominated {
			continue
		}
		at := e.LastTimestamp.Time
		if e.EventTime.After(at) {
			at = e.EventTime.Time
		}
		k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if l, ok := latest[k]; !ok || !at.Before(l.at) {
			latest[k] = last{at, e.Reason, e.Message}
		}
	}
	out := map[string]string{}
	for k, l := range latest {
		if l.reason == karpenterFailed {
			out[k] = l.msg
		}
	}
	return out
}

// take lists the pods of the namespaces and the pods their controllers want, and, when the
// stack has pools at zero, Karpenter's refusals.
func take(ctx context.Context, kube *kubernetes.Clientset, namespaces []string, fromZero map[string]bool) (snapshot, error) {
	s := snapshot{fromZero: fromZero}
	if len(fromZero) > 0 {
		var err error
		if s.refused, err = karpenterRefusals(ctx, kube, namespaces); err != nil {
			return s, err
		}
	}
	want := map[string]int{}
	for _, ns := range namespaces {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return s, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				s.pods = append(s.pods, p)
			}
		}
		sts, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return s, err
		}
		for _, o := range sts.Items {
			want["StatefulSet/"+o.Name] = int(deref(o.Spec.Replicas, 1))
		}
		deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return s, err
		}
		for _, o := range deps.Items {
			want["Deployment/"+o.Name] = int(deref(o.Spec.Replicas, 1))
		}
		dss, err := kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return s, err
		}
		for _, o := range dss.Items {
			n := int(o.Status.DesiredNumberScheduled)
			if o.Status.ObservedGeneration < o.Generation {
				n = max(n, 1) // not counted yet: wait for at least one
			}
			want["DaemonSet/"+o.Name] = n
		}
		jobs, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return s, err
		}
		for _, o := range jobs.Items {
			if o.Status.Succeeded == 0 && o.Status.CompletionTime == nil {
				want["Job/"+o.Name] = int(deref(o.Spec.Parallelism, 1))
			}
		}
	}
	have := map[string]int{}
	for i := range s.pods {
		have[workloadOf(&s.pods[i])]++
	}
	for w, n := range want {
		if have[w] < n {
			s.missing = append(s.missing, Missing{Workload: w, Created: have[w], Wanted: n})
		}
	}
	sort.Slice(s.missing, func(a, b int) bool { return s.missing[a].Workload < s.missing[b].Workload })
	return s, nil
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// waitForScheduler polls until every controller has created its pods and the scheduler (with
// Karpenter, for the pools at zero) has placed or refused each, or until the timeout; it returns
// the last snapshot.
func waitForScheduler(ctx context.Context, kube *kubernetes.Clientset, namespaces []string, fromZero map[string]bool, timeout time.Duration) (snapshot, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := take(ctx, kube, namespaces, fromZero)
		if err != nil {
			return s, err
		}
		if s.complete() || time.Now().After(deadline) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podRequests: what the scheduler counts for a pod: its containers' requests together, or its
// largest init container's if more (sidecars, restartPolicy Always, count with the containers),
// and one pod slot.
func podRequests(p *corev1.Pod) Resources {
	sum := corev1.ResourceList{}
	addTo := func(dst corev1.ResourceList, src corev1.ResourceList) {
		for k, v := range src {
			q := dst[k]
			q.Add(v)
			dst[k] = q
		}
	}
	for _, c := range p.Spec.Containers {
		addTo(sum, c.Resources.Requests)
	}
	init := corev1.ResourceList{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addTo(sum, c.Resources.Requests)
			continue
		}
		for k, v := range c.Resources.Requests {
			if q, ok := init[k]; !ok || v.Cmp(q) > 0 {
				init[k] = v
			}
		}
	}
	for k, v := range init {
		if q := sum[k]; v.Cmp(q) > 0 {
			sum[k] = v
		}
	}
	r := resources(sum)
	r.Pods = 1
	return r
}

func resources(l corev1.ResourceList) Resources {
	var r Resources
	if q, ok := l[gpuResource]; ok {
		r.GPUs = q.Value()
	}
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.MilliCPU = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.Memory = q.Value()
	}
	if q, ok := l[corev1.ResourcePods]; ok {
		r.Pods = q.Value()
	}
	return r
}

// nodeAllocatable: the node's allocatable as the scheduler sees it; before kwok has copied the
// capacity annotation into the status, the annotation itself.
func nodeAllocatable(n *corev1.Node) Resources {
	if _, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
		return resources(n.Status.Allocatable)
	}
	var capacity map[string]string
	if err := json.Unmarshal([]byte(n.Annotations[capacityAnnotation]), &capacity); err != nil {
		return Resources{}
	}
	l := corev1.ResourceList{}
	for k, v := range capacity {
		if q, err := resource.ParseQuantity(v); err == nil {
			l[corev1.ResourceName(k)] = q
		}
	}
	return resources(l)
}

// nodeDevices is how many of an extended resource a node advertises: its allocatable, or before
// kwok has copied the capacity annotation into the status, the annotation.
func nodeDevices(n *corev1.Node, name string) int64 {
	if q, ok := n.Status.Allocatable[corev1.ResourceName(name)]; ok {
		return q.Value()
	}
	var capacity map[string]string
	if err := json.Unmarshal([]byte(n.Annotations[capacityAnnotation]), &capacity); err == nil {
		if q, err := resource.ParseQuantity(capacity[name]); err == nil {
			return q.Value()
		}
	}
	return 0
}

// podDevices is how many of an extended resource a pod's containers request (extended resources
// are requested as limits; the API server copies them to requests).
func podDevices(p *corev1.Pod, name string) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceName(name)]; ok {
			n += q.Value()
		}
	}
	return n
}

// collect fills the report from the mirror's nodes and the last snapshot of its pods.
func collect(ctx context.Context, kube *kubernetes.Clientset, m *Mirror, s snapshot, r *Report) error {
	r.Queue = queueAdmissions(ctx, kube, c2ns(m))
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: clusterLabel + "=" + m.Name})
	if err != nil {
		return err
	}
	pools := map[string]*Pool{}
	nodePool := map[string]string{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		name := n.Labels[poolLabel]
		p, ok := pools[name]
		if !ok {
			d, _ := m.Decl(name)
			p = &Pool{Name: name, Index: d.Index, MaxNodes: d.MaxNodes, Real: d.Real, FromZero: d.FromZero,
				MachineType: n.Labels["node.kubernetes.io/instance-type"], PerNode: nodeAllocatable(n)}
			pools[name] = p
		}
		p.Nodes++
		p.Allocatable = p.Allocatable.add(nodeAllocatable(n))
		nodePool[n.Name] = name
		if z := n.Labels[zoneLabel]; z != "" && !slices.Contains(p.Zones, z) {
			p.Zones = append(p.Zones, z)
			slices.Sort(p.Zones)
		}
		if f := n.Labels[fabricLabel]; f != "" {
			p.Fabric, p.FabricPerNode = f, nodeDevices(n, efaResource)
		}
	}
	// Every pod on the mirror's nodes takes room, whoever made it (the nodes are the mirror's own,
	// but a pod that selects nothing may land anywhere). The mirror's own pods count whatever
	// their phase: kwok completes a Job's pods at once (their containers do not run), while on
	// the cloud the MPI launcher holds its room for the whole training run.
	mine := map[string]bool{}
	for _, ns := range c2ns(m) {
		mine[ns] = true
	}
	all, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	used := map[string]Resources{}
	for i := range all.Items {
		p := &all.Items[i]
		pool, ok := nodePool[p.Spec.NodeName]
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		if !mine[p.Namespace] && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			continue
		}
		pools[pool].Requested = pools[pool].Requested.add(podRequests(p))
		pools[pool].FabricRequested += podDevices(p, efaResource)
		used[p.Spec.NodeName] = used[p.Spec.NodeName].add(podRequests(p))
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if alloc, u := nodeAllocatable(n), used[n.Name]; !u.within(alloc) {
			r.Overcommitted = append(r.Overcommitted, Overcommit{Node: n.Name, Used: u, Allocatable: alloc})
		}
	}
	sort.Slice(r.Overcommitted, func(a, b int) bool { return r.Overcommitted[a].Node < r.Overcommitted[b].Node })
	for _, d := range m.Pools { // the stack file's order
		if p, ok := pools[d.Name]; ok {
			r.Pools = append(r.Pools, *p)
			delete(pools, d.Name)
		} else if d.FromZero { // Karpenter made none of its nodes
			r.Pools = append(r.Pools, Pool{Name: d.Name, Index: d.Index, MaxNodes: d.MaxNodes, FromZero: true})
		}
	}
	for _, p := range pools {
		r.Pools = append(r.Pools, *p)
	}

	for i := range s.pods {
		p := &s.pods[i]
		pod := Pod{Name: p.Name, Workload: workloadOf(p), Pool: p.Spec.NodeSelector[poolLabel], Node: p.Spec.NodeName, Requests: podRequests(p)}
		if pod.Node == "" {
			pod.Undecided = true
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					pod.Reason = c.Message
					pod.Undecided = c.Reason != corev1.PodReasonUnschedulable
				}
			}
			if !pod.Undecided && !queueHeld(p) && s.fromZero[pod.Pool] {
				pod.Autoscaler = s.refused[p.Namespace+"/"+p.Name]
				pod.AwaitsAutoscaler = pod.Autoscaler == ""
				pod.Undecided = pod.AwaitsAutoscaler
			}
		}
		r.Pods = append(r.Pods, pod)
	}
	r.Missing = s.missing
	return nil
}

// c2ns: the mirror's namespaces: the stack's, and the GPU agents'.
func c2ns(m *Mirror) []string {
	ns := "kolotoc-" + m.Name
	return []string{ns, ns + "-gpu-agents"}
}

// leftovers: what of the mirror is still in the cluster (after its destroy, nothing should be).
func leftovers(ctx context.Context, kube *kubernetes.Clientset, m *Mirror, namespaces []string) ([]string, error) {
	var out []string
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: clusterLabel + "=" + m.Name})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		out = append(out, "node/"+n.Name)
	}
	for _, ns := range namespaces {
		if _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			out = append(out, "namespace/"+ns)
		}
	}
	return out, nil
}

// startDeletingNamespaces asks for the namespaces' deletion without waiting for it.
func startDeletingNamespaces(ctx context.Context, kube *kubernetes.Clientset, namespaces []string) {
	for _, ns := range namespaces {
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
}

// clusterDown explains that the local cluster does not answer, and what to do.
func clusterDown(kubeconfig string, err error) string {
	return fmt.Sprintf("the local cluster is not up (%s: %v).\n"+
		"make fit never starts or stops it: start it with `make cluster` (KOLOTOC_REAL_NODE=0 for the simulated nodes alone), then run make fit again",
		kubeconfig, err)
}
