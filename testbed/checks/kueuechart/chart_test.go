package kueuechart

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
	"kolotoc/components/queue"
)

// Kueue's cloud install (issue 43, item 1): upstream's chart at the version Kolotoc pins, rendered
// by Helm's engine as the Kubernetes provider renders it on `pulumi up`, and every object the
// program then registers, after Kolotoc's values and transformations.

// mocks answer the provider's `helm template` invoke with the real rendering of the options the
// program sends, and record every registration.
type mocks struct {
	rendertest.Recorder
	chartDir string
	opts     []Opts
	err      error
}

func (m *mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	if _, err := m.Recorder.Call(args); err != nil || args.Token != TemplateToken {
		return resource.PropertyMap{}, err
	}
	var o Opts
	if err := json.Unmarshal([]byte(args.Args["jsonOpts"].StringValue()), &o); err != nil {
		m.err = err
		return nil, err
	}
	m.opts = append(m.opts, o)
	objs, err := Render(m.chartDir, o)
	if err != nil {
		m.err = err
		return nil, err
	}
	return resource.NewPropertyMapFromMap(map[string]any{"result": objs}), nil
}

// object is one registered Kubernetes object.
type object struct {
	Type, Name string
	Obj        map[string]any
	DependsOn  []string
}

func (o object) kind() string { return o.Type[strings.LastIndex(o.Type, ":")+1:] }

// installed is what the stack's queue registers with Kolotoc installing Kueue.
func installed(t *testing.T) []object {
	t.Helper()
	dir, err := ModuleDir("sigs.k8s.io/kueue", queue.KueueVersion)
	if err != nil {
		t.Fatal(err)
	}
	m := &mocks{chartDir: ChartDir(dir, "kueue")}
	install := true
	args := &queue.Args{
		Config:       queue.Config{Type: queue.TypeKueue, LocalQueue: queue.DefaultLocalQueue, Install: &install, Image: queue.DefaultKueueImage},
		Namespace:    pulumi.String("kolotoc-prod"),
		NamespaceDNS: "kolotoc-prod",
		Labels:       meta.Labels{Instance: "prod", Version: "test"},
		Quota:        map[string]string{"cpu": "64", "memory": "256Gi", meta.GPUResource: "16"},
	}
	err = pulumi.RunErr(func(ctx *pulumi.Context) error {
		_, err := queue.New(ctx, "queue", args)
		return err
	}, pulumi.WithMocks(rendertest.Project, rendertest.Stack, m))
	if err != nil || m.err != nil {
		t.Fatalf("queue: %v; rendering: %v", err, m.err)
	}
	if len(m.opts) != 1 {
		t.Fatalf("the program rendered Kueue's chart %d times, want once", len(m.opts))
	}
	var out []object
	for _, r := range m.Sorted() {
		if !strings.HasPrefix(r.Type, "kubernetes:") || strings.HasPrefix(r.Type, "kubernetes:helm") {
			continue
		}
		out = append(out, object{Type: r.Type, Name: r.Name, Obj: r.Inputs.Mappable(), DependsOn: r.DependsOn})
	}
	return out
}

func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func selector(t *testing.T, v any) labels.Selector {
	t.Helper()
	if v == nil {
		return labels.Everything() // an unset selector matches every object
	}
	b, _ := json.Marshal(v)
	var ls metav1.LabelSelector
	if err := json.Unmarshal(b, &ls); err != nil {
		t.Fatal(err)
	}
	s, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// request is an API request an admission webhook may intercept.
type request struct {
	what            string
	group, resource string
	namespace       string // empty: a cluster-scoped object
	labels          map[string]string
}

// hook is one webhook of a configuration.
type hook struct {
	config, name  string
	failurePolicy string
	raw           map[string]any
}

// matches is the API server's choice of the webhooks a CREATE goes through: a rule naming the
// group and resource, then namespaceSelector (on the namespace's labels, for namespaced objects)
// and objectSelector (on the object's labels).
// https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#matching-requests-rules
// and #matching-requests-namespaceselector, #matching-requests-objectselector.
func (h hook) matches(t *testing.T, r request) bool {
	ruled := false
	rules, _ := h.raw["rules"].([]any)
	for _, x := range rules {
		groups, _ := get(x, "apiGroups").([]any)
		resources, _ := get(x, "resources").([]any)
		ops, _ := get(x, "operations").([]any)
		if (slices.Contains(groups, any(r.group)) || slices.Contains(groups, any("*"))) &&
			(slices.Contains(resources, any(r.resource)) || slices.Contains(resources, any("*"))) &&
			(slices.Contains(ops, any("CREATE")) || slices.Contains(ops, any("*"))) {
			ruled = true
		}
	}
	if !ruled {
		return false
	}
	if r.namespace != "" && !selector(t, h.raw["namespaceSelector"]).Matches(labels.Set{"kubernetes.io/metadata.name": r.namespace}) {
		return false
	}
	return selector(t, h.raw["objectSelector"]).Matches(labels.Set(r.labels))
}

// failsClosed: a webhook without a failurePolicy fails closed (admissionregistration.k8s.io/v1
// defaults it to Fail).
func (h hook) failsClosed() bool { return h.failurePolicy == "" || h.failurePolicy == "Fail" }

func hooks(objs []object) []hook {
	var out []hook
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, o := range ofKind(objs, kind) {
			list, _ := o.Obj["webhooks"].([]any)
			for _, x := range list {
				h := x.(map[string]any)
				out = append(out, hook{config: o.Name, name: fmt.Sprint(h["name"]), failurePolicy: fmt.Sprint(h["failurePolicy"]), raw: h})
			}
		}
	}
	return out
}

// TestKueueWebhooksScoped: only objects that name a queue go through Kueue's workload webhooks;
// a stack's other pods, and Jobs, StatefulSets and Deployments anywhere, never wait on Kueue, so
// an evicted Kueue blocks nothing that is not queued. A queued pod must pass Kueue (fail closed),
// or it would run past the queue. Kueue's own kinds are always defaulted and validated.
// Follows the Kubernetes docs on admission webhooks (matching requests: namespaceSelector,
// objectSelector; failure policy:
// https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#failure-policy),
// Kueue's plain pods task (pods are managed when they carry kueue.x-k8s.io/queue-name,
// https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/) and upstream's exclusion of kube-system
// and kueue-system (v0.17.0 config/components/webhook/kustomization.yaml), as the test bed's
// Kueue is scoped (testbed/cluster/kueuelocal).
func TestKueueWebhooksScoped(t *testing.T) {
	objs := installed(t)
	hs := hooks(objs)
	if len(hs) < 10 {
		t.Fatalf("%d webhooks registered from Kueue's chart, want its whole set", len(hs))
	}
	queued := map[string]string{queue.QueueLabel: queue.DefaultLocalQueue}
	cases := []struct {
		r    request
		want []string // the webhooks that must intercept it, failing closed; none: no webhook fails closed on it
	}{
		{request{"a stack's pod without a queue", "", "pods", "kolotoc-prod", map[string]string{"app.kubernetes.io/name": "entrypoint"}}, nil},
		{request{"a pod of another namespace", "", "pods", "team-a", nil}, nil},
		{request{"a Job in default (the chart's Job webhook failed closed cluster-wide)", "batch", "jobs", "default", nil}, nil},
		{request{"the stack's launcher Job (its pods name the queue, not the Job)", "batch", "jobs", "kolotoc-prod", nil}, nil},
		{request{"the towers' StatefulSet", "apps", "statefulsets", "kolotoc-prod", nil}, nil},
		{request{"a Deployment", "apps", "deployments", "kolotoc-prod", nil}, nil},
		{request{"a kube-system pod, even naming a queue", "", "pods", "kube-system", queued}, nil},
		{request{"a queued pod (a tower)", "", "pods", "kolotoc-prod", queued}, []string{"mpod.kb.io", "vpod.kb.io"}},
		{request{"a Job naming a queue", "batch", "jobs", "kolotoc-prod", queued}, []string{"mjob.kb.io", "vjob.kb.io"}},
		{request{"the stack's ClusterQueue", "kueue.x-k8s.io", "clusterqueues", "", nil}, []string{"mclusterqueue.kb.io", "vclusterqueue.kb.io"}},
		{request{"a Workload", "kueue.x-k8s.io", "workloads", "kolotoc-prod", nil}, []string{"mworkload.kb.io", "vworkload.kb.io"}},
	}
	for _, c := range cases {
		var closed []string
		for _, h := range hs {
			if h.matches(t, c.r) && h.failsClosed() {
				closed = append(closed, h.name)
			}
		}
		slices.Sort(closed)
		if !slices.Equal(closed, c.want) {
			t.Errorf("%s: webhooks failing closed on it %v, want %v", c.r.what, closed, c.want)
		}
	}
	// Every webhook of a workload kind names the queue label; only Kueue's own kinds are
	// unselected.
	for _, h := range hs {
		own := slices.ContainsFunc(queue.WebhookResources(h.raw), func(r string) bool { return strings.HasPrefix(r, "kueue.x-k8s.io/") })
		sel := fmt.Sprint(h.raw["objectSelector"])
		if !own && !strings.Contains(sel, queue.QueueLabel) {
			t.Errorf("webhook %s (%s) intercepts objects without %s: objectSelector %s", h.name, h.config, queue.QueueLabel, sel)
		}
	}
}

// deployment is Kueue's controller Deployment.
func deployment(t *testing.T, objs []object) map[string]any {
	t.Helper()
	ds := ofKind(objs, "Deployment")
	if len(ds) != 1 {
		t.Fatalf("%d Deployments from Kueue's chart, want its controller's", len(ds))
	}
	return ds[0].Obj
}

// TestKueueHighlyAvailable: two replicas with leader election, spread over nodes, and a
// disruption budget keeping one up through a drain, so that the webhooks the stack's queued pods
// pass keep answering. Kueue's chart values (v0.17.0 charts/kueue/values.yaml:
// controllerManager.replicas, controllerManager.podDisruptionBudget) and Configuration
// (leaderElection, https://kueue.sigs.k8s.io/docs/reference/kueue-config.v1beta2/); every
// replica serves the webhooks once its certificates are ready (v0.17.0 cmd/kueue/main.go,
// setupProbeEndpoints); the budget as the Kubernetes docs define minAvailable
// (https://kubernetes.io/docs/tasks/run-application/configure-pdb/).
func TestKueueHighlyAvailable(t *testing.T) {
	objs := installed(t)
	d := deployment(t, objs)
	replicas, _ := get(d, "spec", "replicas").(float64)
	if replicas < 2 {
		t.Errorf("Kueue runs %v replicas: while the one pod is evicted no queued pod can be created", replicas)
	}
	podLabels := labels.Set{}
	for k, v := range get(d, "spec", "template", "metadata", "labels").(map[string]any) {
		podLabels[k] = fmt.Sprint(v)
	}
	anti, _ := get(d, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution").([]any)
	spread := false
	for _, a := range anti {
		term := get(a, "podAffinityTerm")
		spread = spread || (get(term, "topologyKey") == "kubernetes.io/hostname" && selector(t, get(term, "labelSelector")).Matches(podLabels))
	}
	if !spread {
		t.Errorf("Kueue's replicas are not spread over nodes: affinity %v", get(d, "spec", "template", "spec", "affinity"))
	}
	// Leader election on: one replica runs the controllers and the scheduler.
	var config map[string]any
	for _, cm := range ofKind(objs, "ConfigMap") {
		if s, ok := get(cm.Obj, "data", "controller_manager_config.yaml").(string); ok {
			if err := yaml.Unmarshal([]byte(s), &config); err != nil {
				t.Fatal(err)
			}
		}
	}
	if get(config, "leaderElection", "leaderElect") != true {
		t.Errorf("Kueue's Configuration leaderElection %v: two replicas would both schedule", get(config, "leaderElection"))
	}
	if fw := fmt.Sprint(get(config, "integrations", "frameworks")); fw != fmt.Sprint(toAny(queue.KueueFrameworks)) {
		t.Errorf("Kueue's integrations %s, want %v", fw, queue.KueueFrameworks)
	}
	pdbs := ofKind(objs, "PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets for Kueue, want one", len(pdbs))
	}
	pdb := pdbs[0].Obj
	minAvailable, _ := get(pdb, "spec", "minAvailable").(float64)
	if minAvailable < 1 || minAvailable >= replicas {
		t.Errorf("Kueue's budget minAvailable %v with %v replicas: want at least one kept, and a drain still possible", minAvailable, replicas)
	}
	if !selector(t, get(pdb, "spec", "selector")).Matches(podLabels) {
		t.Errorf("Kueue's budget selects %v, not its pods %v", get(pdb, "spec", "selector"), podLabels)
	}
}

// TestKueueNoInsecureAPIService: no aggregated API registered with insecureSkipTLSVerify (the
// Kubernetes API reference: "This is strongly discouraged. You should use the CABundle instead.",
// https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/api-service-v1/). Kueue's
// chart registers its visibility API so unless cert-manager injects a CA (v0.17.0
// charts/kueue/templates/visibility); Kolotoc turns the API off (feature gate
// VisibilityOnDemand, https://kueue.sigs.k8s.io/docs/tasks/manage/monitor_pending_workloads/pending_workloads_on_demand/)
// and registers none of its objects, so no APIService is left without a server either.
func TestKueueNoInsecureAPIService(t *testing.T) {
	objs := installed(t)
	for _, a := range ofKind(objs, "APIService") {
		if get(a.Obj, "spec", "insecureSkipTLSVerify") == true {
			t.Errorf("APIService %s skips TLS verification", a.Name)
		} else if get(a.Obj, "spec", "caBundle") == nil {
			t.Errorf("APIService %s has no caBundle", a.Name)
		}
	}
	args := fmt.Sprint(get(deployment(t, objs), "spec", "template", "spec", "containers"))
	if !strings.Contains(args, "VisibilityOnDemand=false") {
		t.Errorf("Kueue's visibility API is on (the manager's containers %s)", args)
	}
	for _, o := range objs {
		if get(o.Obj, "metadata", "labels", "app.kubernetes.io/component") == "visibility-service" {
			t.Errorf("%s %s of the visibility API is registered, though nothing serves it", o.kind(), o.Name)
		}
	}
}

// TestKueueBeforeTheQueue: the stack's queue objects are written once Kueue's Deployment is ready
// and its webhooks registered (they go through those webhooks).
func TestKueueBeforeTheQueue(t *testing.T) {
	objs := installed(t)
	for _, kind := range []string{"ClusterQueue", "LocalQueue", "ResourceFlavor"} {
		for _, o := range ofKind(objs, kind) {
			for _, want := range []string{"kueue-system/kueue-controller-manager", "kueue-system/kueue-mutating-webhook-configuration"} {
				if !slices.Contains(o.DependsOn, want) {
					t.Errorf("%s %s does not wait for %s (depends on %v)", kind, o.Name, want, o.DependsOn)
				}
			}
		}
	}
}

// TestKueueNamespaceRestricted: a rendered chart has no --create-namespace; Kolotoc makes
// kueue-system at Pod Security restricted, every namespaced object of the chart is in it, and
// Kueue's pod passes the restricted checks of the real admission library
// (k8s.io/pod-security-admission; https://kubernetes.io/docs/concepts/security/pod-security-standards/).
func TestKueueNamespaceRestricted(t *testing.T) {
	objs := installed(t)
	nss := ofKind(objs, "Namespace")
	if len(nss) != 1 || get(nss[0].Obj, "metadata", "name") != queue.KueueNamespace ||
		get(nss[0].Obj, "metadata", "labels", "pod-security.kubernetes.io/enforce") != "restricted" {
		t.Fatalf("Kueue's namespace: %v, want %s enforcing restricted", nss, queue.KueueNamespace)
	}
	for _, o := range objs {
		if ns, ok := get(o.Obj, "metadata", "namespace").(string); ok && ns != queue.KueueNamespace && o.kind() != "LocalQueue" {
			t.Errorf("%s %s is in namespace %s", o.kind(), o.Name, ns)
		}
	}
	var spec corev1.PodSpec
	b, _ := json.Marshal(get(deployment(t, objs), "spec", "template", "spec"))
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	if res := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &metav1.ObjectMeta{}, &spec)); !res.Allowed {
		t.Errorf("Kueue's pod is refused at restricted: %s", res.ForbiddenDetail())
	}
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
