package queue

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	apiextensionsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
	"kolotoc/components/meta"
)

// component is the app.kubernetes.io/component of the queue's objects.
const component = "queue"

// CheckedCRD is the CustomResourceDefinition whose presence says a cluster runs Kueue: read at
// preview on a cluster Kolotoc does not install Kueue on.
const CheckedCRD = "clusterqueues.kueue.x-k8s.io"

// Args is the queue as the stack hands it over.
type Args struct {
	Config
	Namespace    pulumi.StringInput // the stack's namespace (the LocalQueue's)
	NamespaceDNS string             // its name: the ClusterQueue's, ResourceFlavor's and priority classes' prefix
	Labels       meta.Labels
	// Quota is the stack's ClusterQueue's nominal quota by resource name (cpu, memory,
	// nvidia.com/gpu, …), each a quantity; the stack derives it from its pools.
	Quota map[string]string
	// Preempt: the stack's ClusterQueue lets a workload take the quota of lower-priority ones
	// (withinClusterQueue: LowerPriority); set when it queues elastic workers above minNodes,
	// which are admitted one at a time below their group's priority and must yield to a
	// waiting group.
	Preempt bool
	// Check: read CheckedCRD and fail unless the cluster serves Kueue's v1beta2 API (a cluster
	// whose Kueue Kolotoc does not install: existing, and the local test bed's).
	Check bool
	// Provisioning: the stack's ClusterQueue admits a workload only once the cloud has
	// provisioned all its nodes (Kueue's ProvisioningRequest admission check); nil: no check.
	Provisioning *Provisioning
}

// Provisioning is Kueue's ProvisioningRequest admission check as the stack configures it
// (https://kueue.sigs.k8s.io/docs/admission-check-controllers/provisioning/).
type Provisioning struct {
	// Class is the ProvisioningRequest class the cloud's autoscaler serves, e.g.
	// queued-provisioning.gke.io (GKE's Dynamic Workload Scheduler).
	Class string
	// ManagedResources: only the pod sets requesting one of these get nodes provisioned; a
	// workload requesting none is admitted without a ProvisioningRequest (a CPU-only one).
	ManagedResources []string
	// MaxRunDurationSeconds is how long the provisioned nodes may run (the class's
	// maxRunDurationSeconds parameter); 0: the class's default.
	MaxRunDurationSeconds int
}

// ProvisioningController is the controllerName of Kueue's ProvisioningRequest admission check
// (Kueue v0.17 apis/kueue/v1beta2: ProvisioningRequestControllerName). The check's controller
// runs in every Kueue since v0.14 (its ProvisioningACC feature gate is GA and gone), whenever the
// cluster serves the ProvisioningRequest API (cmd/kueue/main.go, setupControllers).
const ProvisioningController = "kueue.x-k8s.io/provisioning-request"

// Queue is the stack's queue.
type Queue struct {
	pulumi.ResourceState
	// Ready is what a queued workload's pods wait for: the LocalQueue (and Kueue's release or
	// check), so that no pod names a queue that is not there yet.
	Ready []pulumi.Resource
}

// New registers the queue.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Queue, error) {
	if args == nil || !args.On() {
		return nil, errors.New("queue: args with type kueue are required")
	}
	q := &Queue{}
	if err := ctx.RegisterComponentResource("kolotoc:queue:Queue", name, q, opts...); err != nil {
		return nil, fmt.Errorf("queue %q: %w", name, err)
	}
	var before []pulumi.Resource
	var after []pulumi.ResourceOption
	served := pulumi.Bool(true).ToBoolOutput()
	if args.Install != nil && *args.Install {
		// A rendered chart has no `helm install --create-namespace`: Kolotoc makes Kueue's
		// namespace, at Pod Security restricted (Kueue's pod meets it), and the chart is rendered
		// once it exists (its name resolves then), so that no object of it waits for a namespace.
		ns, err := corev1.NewNamespace(ctx, name+"-kueue-namespace",
			isolation.Render(KueueNamespace, isolation.Level{Enforce: isolation.Restricted}, args.Labels, component), pulumi.Parent(q))
		if err != nil {
			return nil, fmt.Errorf("queue %q: namespace %q: %w", name, KueueNamespace, err)
		}
		chartArgs := RenderChart(args)
		chartArgs.Namespace = ns.Metadata.Name().Elem()
		chart, err := helmv3.NewChart(ctx, name+"-kueue", chartArgs, pulumi.Parent(q))
		if err != nil {
			return nil, fmt.Errorf("queue %q: Kueue's chart %q: %w", name, name+"-kueue", err)
		}
		// Every object of the chart, the Deployment awaited (both replicas ready, their webhooks
		// serving): the stack's queue objects pass through Kueue's webhooks.
		after = append(after, pulumi.DependsOnInputs(chart.Ready))
	}
	if args.Check {
		crd, err := apiextensionsv1.GetCustomResourceDefinition(ctx, name+"-kueue-api", pulumi.ID(CheckedCRD), nil, pulumi.Parent(q))
		if err != nil {
			return nil, fmt.Errorf("%s.type = %s: the cluster must run Kueue (%s): %w", Key, TypeKueue, CheckedCRD, err)
		}
		served = crd.Spec.Versions().ApplyT(func(vs []apiextensionsv1.CustomResourceDefinitionVersion) (bool, error) {
			return ServesV1beta2(vs)
		}).(pulumi.BoolOutput)
		before = append(before, crd)
	}
	after = append(after, pulumi.Parent(q), pulumi.DependsOn(before))
	clusterQueue := args.ClusterQueue
	if clusterQueue == "" {
		clusterQueue = args.NamespaceDNS
		if _, err := apiextensions.NewCustomResource(ctx, name+"-flavor", RenderFlavor(args), after...); err != nil {
			return nil, fmt.Errorf("queue %q: ResourceFlavor %q: %w", name, name+"-flavor", err)
		}
		cqOpts := after
		if args.Provisioning != nil {
			check, err := newProvisioningCheck(ctx, name, args, after)
			if err != nil {
				return nil, err
			}
			// The ClusterQueue stays inactive while a check it names is missing.
			cqOpts = append(slices.Clone(after), pulumi.DependsOn(check))
		}
		if _, err := apiextensions.NewCustomResource(ctx, name+"-cluster", RenderClusterQueue(args), cqOpts...); err != nil {
			return nil, fmt.Errorf("queue %q: ClusterQueue %q: %w", name, name+"-cluster", err)
		}
	}
	for _, w := range meta.SortedKeys(args.Priorities) {
		pc, err := apiextensions.NewCustomResource(ctx, name+"-priority-"+w, RenderPriorityClass(args, w), after...)
		if err != nil {
			return nil, fmt.Errorf("queue %q: WorkloadPriorityClass %q: %w", name, name+"-priority-"+w, err)
		}
		q.Ready = append(q.Ready, pc)
	}
	// The LocalQueue names its ClusterQueue once the check has passed: a cluster without Kueue's
	// API fails here, with the check's message, before any queued pod is registered.
	cq := clusterQueue
	feeds := served.ApplyT(func(bool) string { return cq }).(pulumi.StringOutput)
	lq, err := apiextensions.NewCustomResource(ctx, name, RenderLocalQueue(args, feeds), after...)
	if err != nil {
		return nil, fmt.Errorf("queue %q: LocalQueue %q: %w", name, name, err)
	}
	q.Ready = append(q.Ready, lq)
	return q, meta.RegisterOutputs(ctx, q, pulumi.Map{"localQueue": pulumi.String(args.LocalQueue), "clusterQueue": pulumi.String(clusterQueue)})
}

// newProvisioningCheck registers the ProvisioningRequestConfig and the AdmissionCheck naming it.
func newProvisioningCheck(ctx *pulumi.Context, name string, args *Args, opts []pulumi.ResourceOption) ([]pulumi.Resource, error) {
	cfg, err := apiextensions.NewCustomResource(ctx, name+"-provisioning", RenderProvisioningConfig(args), opts...)
	if err != nil {
		return nil, fmt.Errorf("queue %q: ProvisioningRequestConfig %q: %w", name, name+"-provisioning", err)
	}
	check, err := apiextensions.NewCustomResource(ctx, name+"-check", RenderAdmissionCheck(args), append(slices.Clone(opts), pulumi.DependsOn([]pulumi.Resource{cfg}))...)
	if err != nil {
		return nil, fmt.Errorf("queue %q: AdmissionCheck %q: %w", name, name+"-check", err)
	}
	return []pulumi.Resource{cfg, check}, nil
}

// ServesV1beta2 reports whether a Kueue CRD serves the API Kolotoc writes.
func ServesV1beta2(vs []apiextensionsv1.CustomResourceDefinitionVersion) (bool, error) {
	if slices.ContainsFunc(vs, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == "v1beta2" && v.Served }) {
		return true, nil
	}
	return false, fmt.Errorf("%s.type = %s: the cluster's Kueue does not serve %s (%s); Kolotoc needs Kueue v0.15 or later", Key, TypeKueue, APIVersion, CheckedCRD)
}

// RenderFlavor is the stack's ResourceFlavor: one flavor, every node of the stack alike (the
// pools' own selectors place the pods).
func RenderFlavor(a *Args) *apiextensions.CustomResourceArgs {
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(APIVersion), Kind: pulumi.String("ResourceFlavor"),
		Metadata:    a.Labels.ObjectMeta(a.NamespaceDNS, nil, component),
		OtherFields: kubernetes.UntypedArgs{"spec": pulumi.Map{}},
	}
}

// RenderClusterQueue is the stack's ClusterQueue: the quota of every resource a queued pod
// requests (Kueue refuses a Workload that asks for a resource its queue does not cover), open
// to every namespace's LocalQueue, so that another stack may name it in queue.clusterQueue.
func RenderClusterQueue(a *Args) *apiextensions.CustomResourceArgs {
	names := meta.SortedKeys(a.Quota)
	var resources pulumi.Array
	for _, n := range names {
		resources = append(resources, pulumi.Map{"name": pulumi.String(n), "nominalQuota": pulumi.String(a.Quota[n])})
	}
	spec := pulumi.Map{
		"namespaceSelector": pulumi.Map{},
		"resourceGroups": pulumi.Array{pulumi.Map{
			"coveredResources": pulumi.ToStringArray(names),
			"flavors":          pulumi.Array{pulumi.Map{"name": pulumi.String(a.NamespaceDNS), "resources": resources}},
		}},
	}
	if a.Provisioning != nil {
		// The check runs for the stack's one flavor, so for every workload of the queue; one that
		// requests no managed resource passes it at once (managedResources).
		spec["admissionChecksStrategy"] = pulumi.Map{"admissionChecks": pulumi.Array{pulumi.Map{
			"name": pulumi.String(a.NamespaceDNS), "onFlavors": pulumi.ToStringArray([]string{a.NamespaceDNS}),
		}}}
	}
	if a.Preempt {
		// https://kueue.sigs.k8s.io/docs/concepts/preemption/: LowerPriority preempts, within
		// this ClusterQueue, workloads of a lower priority when the pending one does not fit.
		spec["preemption"] = pulumi.Map{"withinClusterQueue": pulumi.String("LowerPriority")}
	}
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(APIVersion), Kind: pulumi.String("ClusterQueue"),
		Metadata:    a.Labels.ObjectMeta(a.NamespaceDNS, nil, component),
		OtherFields: kubernetes.UntypedArgs{"spec": spec},
	}
}

// RenderProvisioningConfig is the stack's ProvisioningRequestConfig (cluster-scoped, named after
// the namespace as the ClusterQueue): the class the cloud serves, the resources whose pod sets
// get nodes, and the run duration, which Kueue passes to each ProvisioningRequest as a
// parameter (v0.17 apis/kueue/v1beta2 ProvisioningRequestConfigSpec). GKE's own Kueue setup for
// queued provisioning is this config with provisioningClassName queued-provisioning.gke.io and
// managedResources nvidia.com/gpu, behind an AdmissionCheck of ProvisioningController
// (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest, and the same objects in
// https://docs.cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute).
func RenderProvisioningConfig(a *Args) *apiextensions.CustomResourceArgs {
	p := a.Provisioning
	spec := pulumi.Map{"provisioningClassName": pulumi.String(p.Class)}
	if len(p.ManagedResources) > 0 {
		spec["managedResources"] = pulumi.ToStringArray(p.ManagedResources)
	}
	if p.MaxRunDurationSeconds > 0 {
		// Parameters are strings (Kueue's Parameter type).
		spec["parameters"] = pulumi.StringMap{"maxRunDurationSeconds": pulumi.String(fmt.Sprint(p.MaxRunDurationSeconds))}
	}
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(APIVersion), Kind: pulumi.String("ProvisioningRequestConfig"),
		Metadata:    a.Labels.ObjectMeta(a.NamespaceDNS, nil, component),
		OtherFields: kubernetes.UntypedArgs{"spec": spec},
	}
}

// RenderAdmissionCheck is the stack's AdmissionCheck: Kueue's ProvisioningRequest controller,
// with the stack's ProvisioningRequestConfig as its parameters.
func RenderAdmissionCheck(a *Args) *apiextensions.CustomResourceArgs {
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(APIVersion), Kind: pulumi.String("AdmissionCheck"),
		Metadata: a.Labels.ObjectMeta(a.NamespaceDNS, nil, component),
		OtherFields: kubernetes.UntypedArgs{"spec": pulumi.Map{
			"controllerName": pulumi.String(ProvisioningController),
			"parameters": pulumi.Map{
				"apiGroup": pulumi.String(kueueGroup), "kind": pulumi.String("ProvisioningRequestConfig"), "name": pulumi.String(a.NamespaceDNS),
			},
		}},
	}
}

// RenderLocalQueue is the stack's LocalQueue, feeding clusterQueue.
func RenderLocalQueue(a *Args, clusterQueue pulumi.StringInput) *apiextensions.CustomResourceArgs {
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(APIVersion), Kind: pulumi.String("LocalQueue"),
		Metadata:    a.Labels.ObjectMeta(a.LocalQueue, a.Namespace, component),
		OtherFields: kubernetes.UntypedArgs{"spec": pulumi.Map{"clusterQueue": clusterQueue}},
	}
}

// RenderPriorityClass is a workload's WorkloadPriorityClass (its value is top level, not spec).
func RenderPriorityClass(a *Args, workload string) *apiextensions.CustomResourceArgs {
	return &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(APIVersion), Kind: pulumi.String("WorkloadPriorityClass"),
		Metadata: a.Labels.ObjectMeta(PriorityClass(a.NamespaceDNS, workload), nil, component),
		OtherFields: kubernetes.UntypedArgs{
			"value":       pulumi.Int(int(a.Priorities[workload])),
			"description": pulumi.String(fmt.Sprintf("Kolotoc: the %s of namespace %s", workload, a.NamespaceDNS)),
		},
	}
}

// Outputs are the stack's queue outputs: where its workloads wait and how to see them (a fixed
// size, whatever the number of ranks).
func Outputs(c Config, clusterQueue, namespace string, kubectlf func(string, ...any) pulumi.StringOutput) pulumi.Map {
	return pulumi.Map{
		"localQueue":   pulumi.String(c.LocalQueue),
		"clusterQueue": pulumi.String(clusterQueue),
		// A held workload shows QuotaReserved False and why; an admitted one, Admitted True.
		"workloads": kubectlf("-n %s get workloads.kueue.x-k8s.io -o wide", namespace),
		"pending":   kubectlf("get clusterqueue %s -o jsonpath={.status.pendingWorkloads}", clusterQueue),
	}
}

// splitImage is an image reference's repository and tag (registry.k8s.io/kueue/kueue, v0.17.0).
func splitImage(image string) (repo, tag string) {
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, ""
}
