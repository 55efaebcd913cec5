package tests

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/queue"
	"kolotoc/stacks"
)

// kolotoc:queue (issue 29): where Kueue comes from on each cloud, and what the stack writes.

const (
	tChart         = "kubernetes:helm.sh/v3:Chart"
	tHelmTemplate  = "kubernetes:helm:template"
	tFirewall      = "gcp:compute/firewall:Firewall"
	tCRD           = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
	tClusterQueue  = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
	tLocalQueue    = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
	tFlavor        = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
	tPriorityClass = "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
)

var queueOn = map[string]string{"queue": `{"type":"kueue","priorities":{"towers":100}}`}

// TestQueueCloudInstall: on gcp, aws and azure the stack installs Kueue: the upstream chart from
// its OCI registry at the pinned version, rendered by the provider (helm.v3.Chart: every object
// registered by the program, testbed/checks/kueuechart checks them), the controller image from
// the upstream registry by tag (the chart's own default is a staging image), in kueue-system, two
// replicas with a disruption budget, the visibility API off, Kolotoc's Configuration
// (https://github.com/kubernetes-sigs/kueue/blob/v0.17.0/charts/kueue/values.yaml). Nothing reads
// the cluster for a Kueue of its own.
func TestQueueCloudInstall(t *testing.T) {
	for _, name := range []string{"prod", "aws", "azure"} {
		t.Run(name, func(t *testing.T) {
			r := cloudRec(t, name, queueOn)
			r.one(t, tChart, "queue-kueue")
			if len(r.charts) != 1 {
				t.Fatalf("%d charts rendered, want Kueue's", len(r.charts))
			}
			in := r.charts[0]
			for path, want := range map[string]any{
				"chart": "oci://registry.k8s.io/kueue/charts/kueue", "version": "0.17.0", "namespace": "kueue-system",
			} {
				if got := get(in, path); got != want {
					t.Errorf("Kueue's chart %s = %v, want %v", path, got, want)
				}
			}
			values := get(in, "values")
			img := get(values, "controllerManager", "manager", "image")
			if get(img, "repository") != "registry.k8s.io/kueue/kueue" || get(img, "tag") != "v0.17.0" {
				t.Errorf("Kueue's image %v, want registry.k8s.io/kueue/kueue:v0.17.0", img)
			}
			if get(values, "controllerManager", "replicas") != float64(queue.KueueReplicas) ||
				get(values, "controllerManager", "podDisruptionBudget", "enabled") != true ||
				get(values, "managerConfig", "controllerManagerConfigYaml") != queue.KueueConfiguration() {
				t.Errorf("Kueue's values %v: want %d replicas, a disruption budget and Kolotoc's Configuration", values, queue.KueueReplicas)
			}
			if r.ofType(tCRD) != nil {
				t.Errorf("the stack reads a Kueue CRD on %s, where it installs Kueue itself", name)
			}
			if fw := r.ofType(tFirewall); len(fw) != 0 {
				t.Errorf("a firewall rule for the webhooks on a cluster with a public endpoint: %v", fw[0].Name)
			}
			checkQueued(t, r)
		})
	}
}

// TestQueueGKEPrivateWebhookFirewall: on a GKE cluster with cluster.privateEndpoint, GKE's own
// firewall rule lets the control plane reach the nodes on TCP 443 and 10250 only; Kueue's
// webhooks listen on 9443 in their pods, so without a rule of Kolotoc's the stack's first queue
// object and every queued pod time out in admission. The rule: ingress from the control plane's
// range to the cluster's nodes (its node account) on Kueue's webhook port
// (https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#add_firewall_rules;
// GKE's own rules: https://cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules).
func TestQueueGKEPrivateWebhookFirewall(t *testing.T) {
	private := withCluster(t, "prod", map[string]any{"privateEndpoint": true})
	private["queue"] = queueOn["queue"]
	r := cloudRec(t, "prod", private)
	fw := inputs(r.one(t, tFirewall, "cluster-webhooks"))
	cl := inputs(r.one(t, tGKECluster, "cluster"))
	account := inputs(r.one(t, tGCPAccount, "cluster-nodes"))
	email := fmt.Sprint(get(account, "accountId")) + "@test-project.iam.gserviceaccount.com"
	for path, want := range map[string]any{
		"direction": "INGRESS", "network": get(cl, "network"),
		"allows": []any{map[string]any{"protocol": "tcp", "ports": []any{fmt.Sprint(queue.KueueWebhookPort)}}},
		// GKE reports the control plane's range of a VPC-peering cluster (clouds_test.go's mock).
		"sourceRanges":          []any{fakeGKEControlPlaneRange},
		"targetServiceAccounts": []any{email},
	} {
		if got := get(fw, path); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("webhook firewall %s = %v, want %v", path, got, want)
		}
	}
	// Without a private endpoint GKE's control plane reaches every port; without the queue, no
	// webhook of Kolotoc's needs one.
	for what, ov := range map[string]map[string]string{
		"public endpoint": queueOn,
		"no queue":        withCluster(t, "prod", map[string]any{"privateEndpoint": true}),
	} {
		if fw := cloudRec(t, "prod", ov).ofType(tFirewall); len(fw) != 0 {
			t.Errorf("%s: a webhook firewall rule %s", what, fw[0].Name)
		}
	}
}

// checkQueued: the stack's ClusterQueue holds its pools' quota, its LocalQueue feeds it, and the
// towers' StatefulSet is queued in it as one unit, not awaited.
func checkQueued(t *testing.T, r *recorder) {
	t.Helper()
	cq := inputs(r.one(t, tClusterQueue, "queue-cluster"))
	ns := get(cq, "metadata", "name")
	res, _ := get(cq, "spec", "resourceGroups", "[0]", "flavors", "[0]", "resources").([]any)
	quota := map[string]any{}
	for _, x := range res {
		quota[fmt.Sprint(get(x, "name"))] = get(x, "nominalQuota")
	}
	if quota["nvidia.com/gpu"] == nil || quota["nvidia.com/gpu"] == "0" || quota["cpu"] == nil || quota["memory"] == nil {
		t.Errorf("ClusterQueue quota %v: want the pools' GPUs, CPUs and memory", quota)
	}
	if get(cq, "spec", "namespaceSelector") == nil {
		t.Error("ClusterQueue without a namespaceSelector admits no namespace")
	}
	lq := inputs(r.one(t, tLocalQueue, "queue"))
	if get(lq, "metadata", "name") != queue.DefaultLocalQueue || get(lq, "spec", "clusterQueue") != ns {
		t.Errorf("LocalQueue %v feeding %v, want %s feeding %v", get(lq, "metadata", "name"), get(lq, "spec", "clusterQueue"), queue.DefaultLocalQueue, ns)
	}
	pc := inputs(r.one(t, tPriorityClass, "queue-priority-towers"))
	if get(pc, "value") != 100.0 || get(pc, "metadata", "name") != fmt.Sprint(ns)+"-towers" {
		t.Errorf("towers' WorkloadPriorityClass %v = %v", get(pc, "metadata", "name"), get(pc, "value"))
	}
	// The towers' StatefulSet is queued as one unit by Kueue's StatefulSet integration: the set
	// and its pods name the queue and the towers' priority class, the pods carry no plain
	// pod-group keys (a plain group cannot take back a tower re-created under its old name,
	// docs/queueing.md), and the launcher is not queued.
	sts := inputs(r.one(t, tStatefulSet, "towers"))
	job := inputs(r.one(t, tJob, "towers-launcher"))
	for what, labels := range map[string]any{"StatefulSet": get(sts, "metadata", "labels"), "towers' pods": get(sts, "spec", "template", "metadata", "labels")} {
		if get(labels, "kueue.x-k8s.io/queue-name") != queue.DefaultLocalQueue || get(labels, "kueue.x-k8s.io/priority-class") != fmt.Sprint(ns)+"-towers" {
			t.Errorf("the towers' %s: labels %v, want the queue and the towers' priority class", what, labels)
		}
		if get(labels, "kueue.x-k8s.io/pod-group-name") != nil {
			t.Errorf("the towers' %s: labels %v name a plain pod group", what, labels)
		}
	}
	if ann := get(sts, "spec", "template", "metadata", "annotations"); get(ann, "kueue.x-k8s.io/pod-group-total-count") != nil {
		t.Errorf("the towers' pods: annotations %v count a plain pod group", ann)
	}
	if get(job, "metadata", "labels", "kueue.x-k8s.io/queue-name") != nil || get(job, "spec", "template", "metadata", "labels", "kueue.x-k8s.io/queue-name") != nil {
		t.Error("the launcher names the queue: it would wait for quota apart from its towers")
	}
	if get(sts, "metadata", "annotations", "pulumi.com/skipAwait") != "true" {
		t.Error("queued towers are awaited: a held ring would fail `pulumi up` after awaitTimeout")
	}
}

// kueueCluster is the recorder on a cluster that runs Kueue (its ClusterQueue CRD serves the
// versions given) or none (versions nil): what the provider's read of the CRD returns.
type kueueCluster struct {
	*recorder
	versions []string
}

func (k kueueCluster) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	if args.TypeToken == tCRD && args.ID == queue.CheckedCRD {
		k.recorder.NewResource(args) // recorded, so the test sees the read
		if k.versions == nil {
			return "", nil, errors.New(`customresourcedefinitions.apiextensions.k8s.io "clusterqueues.kueue.x-k8s.io" not found`)
		}
		var vs []any
		for _, v := range k.versions {
			vs = append(vs, map[string]any{"name": v, "served": true, "storage": v == k.versions[len(k.versions)-1]})
		}
		return args.ID, resource.NewPropertyMapFromMap(map[string]any{"spec": map[string]any{"versions": vs}}), nil
	}
	return k.recorder.NewResource(args)
}

// deployOn deploys the prod stack on an existing cluster that runs Kueue of these versions.
func deployOn(t *testing.T, versions []string, overrides map[string]string) (*recorder, error) {
	t.Helper()
	ov := onExistingCluster(t, map[string]string{"storage": `{"type":"nfs","server":"10.0.0.2","path":"/exports"}`})
	for k, v := range overrides {
		ov[k] = v
	}
	raw := stackRaw(t, "prod", ov)
	cfg, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	err = pulumi.RunErr(func(ctx *pulumi.Context) error { return stacks.Deploy(ctx, cfg) },
		pulumi.WithMocks(raw.Project, raw.Stack, kueueCluster{rec, versions}))
	return rec, err
}

// TestQueueExisting: on an existing cluster the stack installs nothing and uses the cluster's own
// Kueue: it reads Kueue's ClusterQueue CRD, and stops with a message naming what is missing when
// the cluster has no Kueue, or one too old to serve the v1beta2 API Kolotoc writes.
func TestQueueExisting(t *testing.T) {
	r, err := deployOn(t, []string{"v1beta1", "v1beta2"}, queueOn)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.ofType(tChart)); n != 0 || len(r.charts) != 0 {
		t.Errorf("%d Helm charts on an existing cluster: its own Kueue is used", n)
	}
	if crd := r.one(t, tCRD, "queue-kueue-api"); crd.Name == "" {
		t.Error("the cluster's Kueue was not checked")
	}
	checkQueued(t, r)

	// A ClusterQueue of the cluster's own: the stack makes only its LocalQueue.
	r, err = deployOn(t, []string{"v1beta2"}, map[string]string{"queue": `{"type":"kueue","clusterQueue":"team-a"}`})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.ofType(tClusterQueue)) + len(r.ofType(tFlavor)); n != 0 {
		t.Errorf("%d ClusterQueues and flavors made beside the named clusterQueue team-a", n)
	}
	if got := get(inputs(r.one(t, tLocalQueue, "queue")), "spec", "clusterQueue"); got != "team-a" {
		t.Errorf("LocalQueue feeds %v, want team-a", got)
	}

	for _, tc := range []struct {
		name     string
		versions []string
		want     string
	}{
		{"no Kueue", nil, "clusterqueues.kueue.x-k8s.io"},
		{"Kueue before v1beta2", []string{"v1beta1"}, "does not serve kueue.x-k8s.io/v1beta2"},
	} {
		if _, err := deployOn(t, tc.versions, queueOn); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: deploy error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// TestQueueTFCluster: a queued TF cluster is one pod group across its task types (chief, workers,
// parameter servers, evaluator), admitted at once or not at all, its StatefulSets not awaited.
func TestQueueTFCluster(t *testing.T) {
	r := cloudRec(t, "prod", map[string]string{"queue": `{"type":"kueue","priorities":{"tfcluster":7}}`,
		"towers": `{"enabled":false}`, "sentinels": `{"enabled":false}`, "tfcluster": `{"enabled":true,"chief":{"count":1},"workers":{"count":2},"ps":{"count":1}}`})
	total, sets := 0, 0
	var groups []any
	for _, s := range r.ofType(tStatefulSet) {
		if !strings.HasPrefix(s.Name, "tfcluster-") {
			continue
		}
		sets++
		in := inputs(s)
		total += int(get(in, "spec", "replicas").(float64))
		md := get(in, "spec", "template", "metadata")
		groups = append(groups, get(md, "labels", "kueue.x-k8s.io/pod-group-name"), get(md, "annotations", "kueue.x-k8s.io/pod-group-total-count"))
		if get(md, "labels", "kueue.x-k8s.io/queue-name") != queue.DefaultLocalQueue || get(md, "labels", "kueue.x-k8s.io/priority-class") == nil {
			t.Errorf("%s: pod labels %v, want the queue and the TF cluster's priority class", s.Name, get(md, "labels"))
		}
		if get(in, "metadata", "annotations", "pulumi.com/skipAwait") != "true" {
			t.Errorf("%s is awaited: a held TF cluster would fail `pulumi up`", s.Name)
		}
	}
	if sets < 3 {
		t.Fatalf("%d TF StatefulSets", sets)
	}
	for i := 0; i < len(groups); i += 2 {
		if groups[i] != stacks.TFGroupName || groups[i+1] != fmt.Sprint(total) {
			t.Errorf("TF task type %d: group %v of %v pods, want %s of %d (every task of every type)", i/2, groups[i], groups[i+1], stacks.TFGroupName, total)
		}
	}
	r.one(t, tPriorityClass, "queue-priority-tfcluster")
}

// TestQueueElastic: queued elastic workers are admitted at minNodes as one StatefulSet (Kueue's
// StatefulSet integration: a lost worker's replacement rejoins under the same admission); the workers above minNodes are an extra StatefulSet
// whose pods are admitted one at a time, below the group's priority, in a ClusterQueue that lets
// a waiting group preempt them; none of them is awaited; a release scales both sets.
// Kueue's rules: https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/ (groups and single pods),
// https://kueue.sigs.k8s.io/docs/concepts/preemption/ (withinClusterQueue: LowerPriority).
func TestQueueElastic(t *testing.T) {
	r := cloudRec(t, "prod", map[string]string{"queue": `{"type":"kueue","priorities":{"elastic":50}}`,
		"towers": `{"enabled":false}`, "sentinels": `{"enabled":false}`,
		"elastic": `{"enabled":true,"minNodes":2,"maxNodes":4,"nodes":4,"onSuccess":"release"}`})
	core, extra := inputs(r.one(t, tStatefulSet, "elastic")), inputs(r.one(t, tStatefulSet, "elastic-extra"))
	cmd := get(core, "spec", "template", "metadata")
	if get(core, "spec", "replicas") != 2.0 || get(core, "metadata", "labels", "kueue.x-k8s.io/queue-name") != queue.DefaultLocalQueue ||
		get(core, "metadata", "labels", "kueue.x-k8s.io/priority-class") == nil || get(cmd, "labels", "kueue.x-k8s.io/pod-group-name") != nil ||
		get(cmd, "annotations", "kueue.x-k8s.io/pod-group-total-count") != nil {
		t.Errorf("first set: replicas %v, labels %v, template %v; want minNodes (2) workers, the set itself queued (Kueue's StatefulSet integration), no plain pod group",
			get(core, "spec", "replicas"), get(core, "metadata", "labels"), cmd)
	}
	if get(extra, "metadata", "labels", "kueue.x-k8s.io/queue-name") != nil {
		t.Error("the extras' StatefulSet names the queue: Kueue would admit the extras as one unit, not one at a time")
	}
	emd := get(extra, "spec", "template", "metadata")
	if get(extra, "spec", "replicas") != 2.0 || get(extra, "spec", "ordinals", "start") != 2.0 ||
		get(emd, "labels", "kueue.x-k8s.io/queue-name") != queue.DefaultLocalQueue || get(emd, "labels", "kueue.x-k8s.io/pod-group-name") != nil ||
		get(emd, "labels", "kueue.x-k8s.io/priority-class") == nil || get(extra, "spec", "selector", "matchLabels", "kolotoc.dev/elastic-set") != "extra" ||
		get(extra, "spec", "serviceName") != "elastic" {
		t.Errorf("extra set: %v; want 2 workers from ordinal 2, each queued alone at the extras' priority, named through the workers' Service", extra)
	}
	for _, s := range []any{core, extra} {
		if get(s, "metadata", "annotations", "pulumi.com/skipAwait") != "true" {
			t.Errorf("%v is awaited: held workers would fail `pulumi up`", get(s, "metadata", "name"))
		}
		env := get(s, "spec", "template", "spec", "containers", "[0]", "env")
		if !strings.Contains(fmt.Sprint(env), "KOLOTOC_RELEASE value:elastic elastic-extra") {
			t.Errorf("%v: env %v; a release must scale both sets", get(s, "metadata", "name"), env)
		}
	}
	group, extras := inputs(r.one(t, tPriorityClass, "queue-priority-elastic")), inputs(r.one(t, tPriorityClass, "queue-priority-elastic-extra"))
	if get(group, "value") != 50.0 || get(extras, "value") != 49.0 {
		t.Errorf("priorities: group %v, extras %v; want 50 and 49", get(group, "value"), get(extras, "value"))
	}
	if get(emd, "labels", "kueue.x-k8s.io/priority-class") != get(extras, "metadata", "name") {
		t.Errorf("extras' pods name class %v, want %v", get(emd, "labels", "kueue.x-k8s.io/priority-class"), get(extras, "metadata", "name"))
	}
	cq := inputs(r.one(t, tClusterQueue, "queue-cluster"))
	if get(cq, "spec", "preemption", "withinClusterQueue") != "LowerPriority" {
		t.Errorf("ClusterQueue preemption %v: a group waiting behind extras would wait for good", get(cq, "spec", "preemption"))
	}
	role := inputs(r.one(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", "elastic-release"))
	if !strings.Contains(fmt.Sprint(role), "elastic-extra") {
		t.Errorf("the release Role %v cannot scale the extras", role)
	}
}
