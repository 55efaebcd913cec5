package queue

import (
	"fmt"
	"strings"

	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/yaml"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// Kueue on the clouds: upstream's chart, pinned, rendered by the Kubernetes provider's `helm
// template` and registered object by object from this program (pulumi-kubernetes' helm.v3.Chart),
// so that Kolotoc sees, changes and previews every object it applies. Upstream's chart alone
// (v0.17.0) makes its pod, Deployment and StatefulSet webhooks fail closed in every namespace but
// two, its Job webhook cluster-wide, runs one replica without a disruption budget and registers
// the visibility API as an APIService with insecureSkipTLSVerify; the values and transformations
// below are what Kolotoc changes, each for the reason given beside it.

// KueueFullname names Kueue's objects (kueue-controller-manager, kueue-webhook-service, …),
// whatever the release is called: the names upstream's manifests use, which Kueue's internal
// certificate manager derives the webhook configurations' names from.
const KueueFullname = "kueue"

// KueueReplicas: two controller replicas, so that one evicted pod (a drain, a node upgrade, a
// spot reclaim) leaves the webhooks answering. Every replica serves the webhooks once its
// certificates are ready (Kueue v0.17 cmd/kueue/main.go, setupProbeEndpoints); one, the leader,
// runs the controllers and the scheduler (leader election, KueueConfiguration).
const KueueReplicas = 2

// KueueMinAvailable: the disruption budget keeps one replica up through voluntary evictions.
const KueueMinAvailable = 1

// KueueWebhookPort is the port Kueue's webhook server listens on in its pod, the webhook
// Service's targetPort: what a cloud's control plane dials (GKE private clusters' firewall
// admits it only when told, components/cloud/gke).
const KueueWebhookPort = 9443

// QueueLabel is the label that names an object's LocalQueue (Kueue's constants.QueueLabel); the
// webhooks of workload kinds see only objects carrying it.
const QueueLabel = "kueue.x-k8s.io/queue-name"

// KueueFrameworks are the integrations Kolotoc's Kueue runs: pods (the pod groups Kolotoc's
// workloads form, docs/queueing.md), and batch/job and statefulset as the test bed's Kueue
// (testbed/cluster/kueuelocal), for objects that name a queue themselves.
var KueueFrameworks = []string{"batch/job", "pod", "statefulset"}

// KueueSystemNamespaces are upstream's exclusions for the pod-based integrations
// (config/components/webhook/kustomization.yaml): Kueue never manages the cluster's own pods or
// its own.
var KueueSystemNamespaces = []string{"kube-system", KueueNamespace}

// kueueGroup is the API group of Kueue's own kinds.
const kueueGroup = "kueue.x-k8s.io"

// enabledResources are the workload kinds whose integration KueueFrameworks enables, by
// group/resource as the webhooks' rules name them. A webhook for any other kind is Kueue's no-op
// webhook (v0.17 pkg/controller/jobframework/setup.go: a disabled integration still registers
// one).
var enabledResources = map[string]bool{"/pods": true, "batch/jobs": true, "apps/statefulsets": true}

// KueueConfiguration is the Configuration Kolotoc's Kueue runs with
// (config.kueue.x-k8s.io/v1beta2, https://kueue.sigs.k8s.io/docs/reference/kueue-config.v1beta2/):
// upstream chart's defaults for the ports, leader election on (KueueReplicas), the on-demand
// visibility API off (KueueFeatureGates), only KueueFrameworks, jobs without a queue name left
// alone, and the pod-based integrations outside KueueSystemNamespaces.
func KueueConfiguration() string {
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: %d
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
clientConnection:
  qps: 50
  burst: 100
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [%s]
integrations:
  frameworks: [%s]
`, KueueWebhookPort, quotedList(KueueSystemNamespaces), quotedList(KueueFrameworks))
}

func quotedList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// RenderChart is Kueue's upstream chart, pinned (KueueChart at KueueVersion), in KueueNamespace,
// with Kolotoc's values: the controller image from the upstream registry by tag (the chart's
// default points at a staging registry), KueueReplicas with a disruption budget
// (controllerManager.podDisruptionBudget), the visibility API's feature gate off and
// KueueConfiguration. What values cannot say, KueueTransformations does.
// https://github.com/kubernetes-sigs/kueue/tree/v0.17.0/charts/kueue (README and values.yaml).
func RenderChart(a *Args) helmv3.ChartArgs {
	repo, tag := splitImage(a.Image)
	return helmv3.ChartArgs{
		Chart:     pulumi.String(KueueChart),
		Version:   pulumi.String(KueueVersion[1:]), // the chart's version has no v
		Namespace: pulumi.String(KueueNamespace),
		Values: pulumi.Map{
			"fullnameOverride": pulumi.String(KueueFullname),
			"controllerManager": pulumi.Map{
				"replicas": pulumi.Int(KueueReplicas),
				"manager": pulumi.Map{"image": pulumi.Map{
					"repository": pulumi.String(repo), "tag": pulumi.String(tag), "pullPolicy": pulumi.String("IfNotPresent"),
				}},
				"podDisruptionBudget": pulumi.Map{"enabled": pulumi.Bool(true), "minAvailable": pulumi.Int(KueueMinAvailable)},
				// The on-demand visibility API is an aggregated API: the chart registers it with
				// insecureSkipTLSVerify unless cert-manager injects a CA. Kolotoc reads pending
				// workloads from the ClusterQueue's status (its pending output), so the API is
				// turned off and its APIServices dropped (dropVisibility).
				"featureGates": pulumi.Array{pulumi.Map{"name": pulumi.String("VisibilityOnDemand"), "enabled": pulumi.Bool(false)}},
			},
			"managerConfig": pulumi.Map{"controllerManagerConfigYaml": pulumi.String(KueueConfiguration())},
		},
		Transformations: KueueTransformations(),
	}
}

// KueueTransformations change the chart's objects before they are registered (pulumi-kubernetes
// helm.v3.Chart transformations; an object turned into an empty v1/List is not registered).
func KueueTransformations() []yaml.Transformation {
	return []yaml.Transformation{
		func(obj map[string]any, _ ...pulumi.ResourceOption) { TransformKueue(obj) },
	}
}

// TransformKueue is Kolotoc's change to one object of Kueue's chart, in place.
func TransformKueue(obj map[string]any) {
	switch fmt.Sprint(obj["kind"]) {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		scopeWebhooks(obj)
	case "Deployment":
		spreadManager(obj)
	}
	dropVisibility(obj)
}

// WebhookScope is how Kolotoc scopes one of Kueue's webhooks: which objects the API server sends
// it and what happens to them when Kueue does not answer.
type WebhookScope struct {
	Own           bool   // a webhook of Kueue's own kinds (ClusterQueue, Workload, …): every object
	FailurePolicy string // Fail | Ignore
	Why           string
}

// ScopeOf is the scope of a webhook whose rules name these group/resource pairs ("/pods",
// "batch/jobs", "kueue.x-k8s.io/workloads", …).
//
//   - Kueue's own kinds: every object, Fail. Only Kueue's objects pass there (the stack's queue
//     objects among them, which wait for Kueue anyway); their defaulting and validation must not
//     be skipped, and nothing else waits on it.
//   - Workload kinds of an enabled integration (pods, Jobs, StatefulSets): only objects naming a
//     queue (QueueLabel), outside KueueSystemNamespaces, Fail. An object that names a queue
//     admitted while Kueue is down would run past the queue (no scheduling gate, no quota), so
//     it is refused until Kueue answers; every other object never calls Kueue, so a down Kueue
//     blocks no pod that is not queued. Two replicas and the disruption budget keep it answering.
//   - Workload kinds of integrations Kolotoc does not enable (Deployments, MPIJobs, RayJobs, …):
//     the same selectors, Ignore: Kueue answers them with a no-op webhook, and nothing is lost if
//     it does not.
func ScopeOf(resources []string) WebhookScope {
	own, enabled := false, false
	for _, r := range resources {
		group, _, _ := strings.Cut(r, "/")
		own = own || group == kueueGroup
		enabled = enabled || enabledResources[r]
	}
	switch {
	case own:
		return WebhookScope{Own: true, FailurePolicy: "Fail", Why: "Kueue's own kinds"}
	case enabled:
		return WebhookScope{FailurePolicy: "Fail", Why: "an enabled integration: a queued object must not run past the queue"}
	default:
		return WebhookScope{FailurePolicy: "Ignore", Why: "an integration Kolotoc does not enable: Kueue's no-op webhook"}
	}
}

// WebhookResources are the group/resource pairs a webhook's rules name.
func WebhookResources(hook map[string]any) []string {
	var out []string
	rules, _ := hook["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		groups, _ := rule["apiGroups"].([]any)
		resources, _ := rule["resources"].([]any)
		for _, g := range groups {
			for _, res := range resources {
				out = append(out, fmt.Sprint(g)+"/"+fmt.Sprint(res))
			}
		}
	}
	return out
}

// scopeWebhooks applies ScopeOf to every webhook of a configuration.
func scopeWebhooks(obj map[string]any) {
	hooks, _ := obj["webhooks"].([]any)
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			continue
		}
		s := ScopeOf(WebhookResources(hook))
		hook["failurePolicy"] = s.FailurePolicy
		if s.Own {
			continue
		}
		hook["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
			"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": toAny(KueueSystemNamespaces),
		}}}
		hook["objectSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
			"key": QueueLabel, "operator": "Exists",
		}}}
	}
}

// spreadManager keeps Kueue's replicas on different nodes where the pool allows (preferred, as
// Kolotoc's own components: a one-node system pool still runs both) and off spot nodes, whose
// reclaim ignores the disruption budget.
func spreadManager(obj map[string]any) {
	spec, _ := obj["spec"].(map[string]any)
	selector, _ := spec["selector"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	if selector == nil || pod == nil {
		return
	}
	var notSpot []any
	for _, k := range meta.SortedKeys(meta.SpotLabels) {
		notSpot = append(notSpot, map[string]any{"key": k, "operator": "NotIn", "values": []any{meta.SpotLabels[k]}})
	}
	pod["affinity"] = map[string]any{
		"podAntiAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
			"weight": 100,
			"podAffinityTerm": map[string]any{
				"topologyKey":   "kubernetes.io/hostname",
				"labelSelector": map[string]any{"matchLabels": selector["matchLabels"]},
			},
		}}},
		"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": notSpot}},
		}},
	}
}

// visibilityComponent is the app.kubernetes.io/component of the chart's visibility API objects:
// its two APIServices, their Service and the RoleBinding in kube-system that lets the server
// read the API server's client CA.
const visibilityComponent = "visibility-service"

// dropVisibility turns the visibility API's objects into an empty List (not registered): with
// VisibilityOnDemand off nothing serves them, and an APIService without a server breaks the
// cluster's API discovery. Any other APIService that skips TLS verification is dropped too.
func dropVisibility(obj map[string]any) {
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	spec, _ := obj["spec"].(map[string]any)
	insecure := obj["kind"] == "APIService" && spec["insecureSkipTLSVerify"] == true
	if labels["app.kubernetes.io/component"] != visibilityComponent && !insecure {
		return
	}
	for k := range obj {
		delete(obj, k)
	}
	obj["apiVersion"], obj["kind"], obj["items"] = "v1", "List", []any{}
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
