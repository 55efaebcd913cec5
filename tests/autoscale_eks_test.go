package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Pools at zero on aws (issue 41): Karpenter, beside TestGKEPoolAtZero and TestAKSPoolAtZero
// (autoscale_test.go). Every expected value is written out as the vendor document gives it, not
// taken from the code under test. On the old code each test fails at Load: aws refused minNodes
// 0 ("Karpenter for EKS is not built yet").

// Karpenter on EKS: the resources Kolotoc registers for it, by type.
const (
	tSQSQueue       = "aws:sqs/queue:Queue"
	tSQSQueuePolicy = "aws:sqs/queuePolicy:QueuePolicy"
	tEventRule      = "aws:cloudwatch/eventRule:EventRule"
	tEventTarget    = "aws:cloudwatch/eventTarget:EventTarget"
	tRolePolicy     = "aws:iam/rolePolicy:RolePolicy"
	tPodIdentity    = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
	tAccessEntry    = "aws:eks/accessEntry:AccessEntry"
	tEC2NodeClass   = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
	tKarpenterPool  = "kubernetes:karpenter.sh/v1:NodePool"
	fakeAWSAccount  = "123456789012"
)

// fakeAWSARN is the ARN the mocked AWS gives a resource of a service in the example's region.
func fakeAWSARN(service, resource string) string {
	return "arn:aws:" + service + ":us-east-1:" + fakeAWSAccount + ":" + resource
}

// eksAtZero is the aws example with its GPU pool at zero (a compact p4d pool with 4 EFA
// interfaces per node, as the example's) and its CPU pools kept: cpu 1..3, ops 1.
var eksAtZero = map[string]string{
	"nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","minNodes":0,"maxNodes":4,"scaleDownAfter":"30m"},` +
		`{"name":"cpu","machineType":"m6i.4xlarge","nodes":1,"maxNodes":3,"spot":true},` +
		`{"name":"ops","machineType":"m6i.large","nodes":1}]`,
}

// TestEKSPoolAtZeroKarpenterInstall: an aws stack with a pool at zero installs Karpenter as its
// "Getting Started with Karpenter" guide does for the pinned version
// (https://karpenter.sh/v1.13/getting-started/getting-started-with-karpenter/, and its
// cloudformation.yaml: website/content/en/v1.13/getting-started/getting-started-with-karpenter/
// in aws/karpenter-provider-aws).
func TestEKSPoolAtZeroKarpenterInstall(t *testing.T) {
	rec := cloudRec(t, "aws", eksAtZero)
	cluster := "kolotoc-aws"

	// The chart from its OCI registry at 1.13.0 in kube-system, with the cluster's name and its
	// interruption queue (the guide's step08: `helm upgrade --install karpenter
	// oci://public.ecr.aws/karpenter/karpenter --version "${KARPENTER_VERSION}" --namespace
	// "${KARPENTER_NAMESPACE}" --set "settings.clusterName=${CLUSTER_NAME}" --set
	// "settings.interruptionQueue=${CLUSTER_NAME}"`, KARPENTER_NAMESPACE=kube-system), the
	// controller image by tag (charts/karpenter/values.yaml: controller.image), and the service
	// account the Pod Identity association names.
	rec.one(t, tChart, "karpenter")
	var chart map[string]any
	for _, c := range rec.charts {
		if c["chart"] == "oci://public.ecr.aws/karpenter/karpenter" {
			chart = c
		}
	}
	if chart == nil {
		t.Fatalf("no Karpenter chart rendered: %v", rec.charts)
	}
	for path, want := range map[string]any{"version": "1.13.0", "namespace": "kube-system"} {
		if got := get(chart, path); got != want {
			t.Errorf("Karpenter's chart %s = %v, want %v", path, got, want)
		}
	}
	values := get(chart, "values")
	for path, want := range map[string]any{
		"settings.clusterName": cluster, "settings.interruptionQueue": cluster,
		"controller.image.repository": "public.ecr.aws/karpenter/controller", "controller.image.tag": "1.13.0",
		"serviceAccount.name": "karpenter",
		// Two replicas, each on a node of its own that Karpenter did not make (the chart's
		// required anti-affinity and karpenter.sh/nodepool DoesNotExist): cpu and ops have one each.
		"replicas": 2.0,
	} {
		if got := get(values, strings.Split(path, ".")...); got != want {
			t.Errorf("Karpenter's values %s = %v, want %v", path, got, want)
		}
	}

	// The controller's identity through EKS Pod Identity: kube-system/karpenter gets the
	// controller's role, which pods.eks.amazonaws.com assumes with sts:AssumeRole and
	// sts:TagSession (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html; the
	// guide's step02: podIdentityAssociations, namespace kube-system, serviceAccountName
	// karpenter, and the eks-pod-identity-agent add-on).
	assoc := inputs(rec.one(t, tPodIdentity, "cluster-kctrl"))
	ctrlARN := "arn:aws:iam::" + fakeAWSAccount + ":role/" + cluster + "-kctrl"
	for path, want := range map[string]any{"clusterName": cluster, "namespace": "kube-system", "serviceAccount": "karpenter", "roleArn": ctrlARN} {
		if got := get(assoc, path); got != want {
			t.Errorf("Pod Identity association %s = %v, want %v", path, got, want)
		}
	}
	trust := fmt.Sprint(get(inputs(rec.one(t, tIAMRole, "cluster-kctrl")), "assumeRolePolicy"))
	if !strings.Contains(trust, `"pods.eks.amazonaws.com"`) || !strings.Contains(trust, "sts:TagSession") {
		t.Errorf("controller role's trust policy %s: want pods.eks.amazonaws.com with sts:AssumeRole and sts:TagSession", trust)
	}
	agent := false
	for _, a := range rec.ofType(tEKSAddon) {
		agent = agent || get(inputs(a), "addonName") == "eks-pod-identity-agent"
	}
	if !agent {
		t.Error("no eks-pod-identity-agent add-on: the association would give the controller nothing")
	}

	// The controller's policy, scoped as the guide's (NodeLifecyclePolicy, IAMIntegrationPolicy,
	// EKSIntegrationPolicy, InterruptionPolicy, ResourceDiscoveryPolicy): mutating actions on
	// resources tagged kubernetes.io/cluster/<cluster>: owned, PassRole on the node role only,
	// DescribeCluster on this cluster only, the queue's actions on this queue only; nothing but
	// reads on "*".
	nodeARN := "arn:aws:iam::" + fakeAWSAccount + ":role/" + cluster + "-knodes"
	queueARN := fakeAWSARN("sqs", cluster)
	var doc struct {
		Statement []struct {
			Sid       string
			Resource  any
			Action    any
			Condition map[string]map[string]any
		}
	}
	if err := json.Unmarshal([]byte(fmt.Sprint(get(inputs(rec.one(t, tRolePolicy, "cluster-kctrl")), "policy"))), &doc); err != nil {
		t.Fatalf("controller policy: %v", err)
	}
	bySid := map[string]int{}
	for i, s := range doc.Statement {
		bySid[s.Sid] = i
		if s.Resource != "*" {
			continue
		}
		for _, a := range strings.Fields(strings.Trim(fmt.Sprint(s.Action), "[]")) {
			verb := a[strings.Index(a, ":")+1:]
			if !strings.HasPrefix(verb, "Describe") && !strings.HasPrefix(verb, "Get") && !strings.HasPrefix(verb, "List") {
				t.Errorf("controller policy statement %s: %s on every resource", s.Sid, a)
			}
		}
	}
	scoped := map[string]func(i int) bool{
		"AllowPassingInstanceRole":        func(i int) bool { return doc.Statement[i].Resource == nodeARN },
		"AllowAPIServerEndpointDiscovery": func(i int) bool { return doc.Statement[i].Resource == fakeAWSARN("eks", "cluster/"+cluster) },
		"AllowInterruptionQueueActions":   func(i int) bool { return doc.Statement[i].Resource == queueARN },
		"AllowScopedEC2InstanceActionsWithTags": func(i int) bool {
			return doc.Statement[i].Condition["StringEquals"]["aws:RequestTag/kubernetes.io/cluster/"+cluster] == "owned"
		},
		"AllowScopedDeletion": func(i int) bool {
			return doc.Statement[i].Condition["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/"+cluster] == "owned"
		},
		"AllowScopedInstanceProfileCreationActions": func(i int) bool {
			return doc.Statement[i].Condition["StringEquals"]["aws:RequestTag/topology.kubernetes.io/region"] == "us-east-1"
		},
	}
	for sid, ok := range scoped {
		if i, found := bySid[sid]; !found || !ok(i) {
			t.Errorf("controller policy statement %s missing or not scoped to %s (statements %v)", sid, cluster, bySid)
		}
	}

	// The interruption queue: named after the cluster, messages kept 300 s, SQS-managed SSE; its
	// policy lets EventBridge send to it; one rule per event of the guide, each targeting it.
	q := inputs(rec.one(t, tSQSQueue, "cluster-interruption"))
	if get(q, "name") != cluster || get(q, "messageRetentionSeconds") != 300.0 || get(q, "sqsManagedSseEnabled") != true {
		t.Errorf("interruption queue %v: want %s, 300 s, SQS-managed SSE", q, cluster)
	}
	qp := fmt.Sprint(get(inputs(rec.one(t, tSQSQueuePolicy, "cluster-interruption")), "policy"))
	if !strings.Contains(qp, `"events.amazonaws.com"`) || !strings.Contains(qp, `"sqs:SendMessage"`) || !strings.Contains(qp, queueARN) {
		t.Errorf("queue policy %s: want events.amazonaws.com allowed sqs:SendMessage on %s", qp, queueARN)
	}
	rules := map[string]string{} // rule name → "source detail-type"
	for _, r := range rec.ofType(tEventRule) {
		in := inputs(r)
		var pattern map[string][]string
		_ = json.Unmarshal([]byte(fmt.Sprint(get(in, "eventPattern"))), &pattern)
		if len(pattern["source"]) == 1 && len(pattern["detail-type"]) == 1 {
			rules[fmt.Sprint(get(in, "name"))] = pattern["source"][0] + " " + pattern["detail-type"][0]
		}
	}
	targets := map[string]bool{}
	for _, tg := range rec.ofType(tEventTarget) {
		if get(inputs(tg), "arn") == queueARN {
			targets[fmt.Sprint(get(inputs(tg), "rule"))] = true
		}
	}
	for _, event := range []string{
		"aws.ec2 EC2 Spot Instance Interruption Warning",                 // SpotInterruptionRule
		"aws.ec2 EC2 Instance Rebalance Recommendation",                  // RebalanceRule
		"aws.ec2 EC2 Instance State-change Notification",                 // InstanceStateChangeRule
		"aws.health AWS Health Event",                                    // ScheduledChangeRule
		"aws.ec2 EC2 Capacity Reservation Instance Interruption Warning", // CapacityReservationInterruptionRule
	} {
		found := false
		for name, e := range rules {
			found = found || (e == event && targets[name])
		}
		if !found {
			t.Errorf("no EventBridge rule for %q targeting the queue (rules %v, targets %v)", event, rules, targets)
		}
	}

	// The nodes' role (the guide's KarpenterNodeRole and its policies) and its EKS access entry
	// of type EC2_LINUX, without which Karpenter's nodes cannot join
	// (https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html).
	attached := map[string]bool{}
	for _, a := range rec.ofType(tIAMAttachment) {
		if strings.HasPrefix(a.Name, "cluster-knodes-") {
			attached[fmt.Sprint(get(inputs(a), "policyArn"))] = true
		}
	}
	for _, p := range []string{"AmazonEKS_CNI_Policy", "AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore"} {
		if !attached["arn:aws:iam::aws:policy/"+p] {
			t.Errorf("Karpenter's node role lacks %s (attached: %v)", p, attached)
		}
	}
	entry := inputs(rec.one(t, tAccessEntry, "cluster-knodes"))
	if get(entry, "type") != "EC2_LINUX" || get(entry, "principalArn") != nodeARN {
		t.Errorf("access entry %v: want EC2_LINUX for %s", entry, nodeARN)
	}
}

// TestEKSPoolAtZeroNodePool: the pool at zero is a Karpenter NodePool and EC2NodeClass, not a
// node group; its nodes carry what the node group's would (labels, taints), of its instance type
// and capacity type, in its zone and placement group, with its EFA interfaces' security group;
// the fixed pools stay node groups.
func TestEKSPoolAtZeroNodePool(t *testing.T) {
	rec := cloudRec(t, "aws", eksAtZero)
	cluster := "kolotoc-aws"
	for _, g := range rec.ofType(tEKSNodeGroup) {
		if g.Name == "cluster-gpu" {
			t.Error("the pool at zero is still a managed node group")
		}
	}
	cpu := inputs(rec.one(t, tEKSNodeGroup, "cluster-cpu"))
	if get(cpu, "scalingConfig", "minSize") != 1.0 || get(cpu, "scalingConfig", "maxSize") != 3.0 {
		t.Errorf("fixed pool cpu: scaling %v, want a node group 1..3", get(cpu, "scalingConfig"))
	}
	rec.one(t, tEKSNodeGroup, "cluster-ops")
	for _, lt := range rec.ofType(tLaunchTemplate) {
		if lt.Name == "cluster-gpu" {
			t.Error("a launch template for the pool at zero: Karpenter makes its own from the EC2NodeClass")
		}
	}

	// The node group the same pool has when fixed: what Karpenter's nodes must carry too.
	fixedPools := strings.Replace(eksAtZero["nodePools"], `"minNodes":0,"maxNodes":4,"scaleDownAfter":"30m"`, `"nodes":2`, 1)
	fixed := inputs(cloudRec(t, "aws", map[string]string{"nodePools": fixedPools}).one(t, tEKSNodeGroup, "cluster-gpu"))

	// EC2NodeClass (https://karpenter.sh/v1.13/concepts/nodeclasses/): spec.role (Karpenter makes
	// the instance profile); spec.amiSelectorTerms, the al2023 alias pinned to a release ("we
	// strongly recommend using version pins in production"; with an alias Karpenter picks the
	// NVIDIA variant for a GPU instance type); the compact pool's one subnet and the cluster
	// security group EKS gives managed nodes, and the EFA group; spec.placementGroupSelector by
	// name; a 100 GiB root volume as the node groups'.
	class := inputs(rec.one(t, tEC2NodeClass, "karpenter-gpu-class"))
	spec := get(class, "spec")
	for path, want := range map[string]any{
		"role": cluster + "-knodes", "placementGroupSelector.name": cluster + "-gpu",
		"blockDeviceMappings.[0].ebs.volumeSize": "100Gi", "blockDeviceMappings.[0].deviceName": "/dev/xvda",
	} {
		if got := get(spec, strings.Split(path, ".")...); got != want {
			t.Errorf("EC2NodeClass %s = %v, want %v", path, got, want)
		}
	}
	if fmt.Sprint(get(spec, "amiSelectorTerms")) != "[map[alias:al2023@v20260520]]" {
		t.Errorf("EC2NodeClass amiSelectorTerms %v, want the alias al2023@v20260520 alone", get(spec, "amiSelectorTerms"))
	}
	// The compact node group's one subnet (EC2 cluster placement groups live in one zone:
	// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html#placement-groups-cluster).
	var subnets []any
	for _, s := range get(fixed, "subnetIds").([]any) {
		subnets = append(subnets, map[string]any{"id": s})
	}
	if len(subnets) != 1 || fmt.Sprint(get(spec, "subnetSelectorTerms")) != fmt.Sprint(subnets) {
		t.Errorf("EC2NodeClass subnets %v, want the compact node group's %v", get(spec, "subnetSelectorTerms"), subnets)
	}
	groups := fmt.Sprint(get(spec, "securityGroupSelectorTerms"))
	if !strings.Contains(groups, fakeNodeSG) || !strings.Contains(groups, "cluster-efa-id") {
		t.Errorf("EC2NodeClass security groups %s, want the cluster's (%s) and the EFA group", groups, fakeNodeSG)
	}
	rec.one(t, tPlacementGroup, "cluster-gpu")

	// NodePool (https://karpenter.sh/v1.13/concepts/nodepools/ and /concepts/disruption/):
	// requirements on the well-known labels (/concepts/scheduling/), the node group's labels and
	// taints, limits, disruption.
	np := inputs(rec.one(t, tKarpenterPool, "karpenter-gpu"))
	tmpl := get(np, "spec", "template")
	reqs := map[string]string{}
	for _, r := range get(tmpl, "spec", "requirements").([]any) {
		reqs[fmt.Sprint(get(r, "key"))] = fmt.Sprint(get(r, "operator"), get(r, "values"))
	}
	for key, want := range map[string]string{
		"node.kubernetes.io/instance-type": "In[p4d.24xlarge]",
		"karpenter.sh/capacity-type":       "In[on-demand]",
		"topology.kubernetes.io/zone":      "In[us-east-1a]",
	} {
		if reqs[key] != want {
			t.Errorf("NodePool requirement %s = %q, want %q", key, reqs[key], want)
		}
	}
	labels, _ := get(tmpl, "metadata", "labels").(map[string]any)
	if fmt.Sprint(labels) != fmt.Sprint(get(fixed, "labels")) || labels["kolotoc.dev/pool"] != "gpu" {
		t.Errorf("NodePool labels %v, want the node group's %v", labels, get(fixed, "labels"))
	}
	// EKS writes a node group's taint effects as NO_SCHEDULE and the like, Kubernetes as NoSchedule.
	effects := map[string]string{"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
	var groupTaints, poolTaints []string
	for _, tt := range get(fixed, "taints").([]any) {
		groupTaints = append(groupTaints, fmt.Sprint(get(tt, "key"), "=", get(tt, "value"), ":", effects[fmt.Sprint(get(tt, "effect"))]))
	}
	for _, tt := range get(tmpl, "spec", "taints").([]any) {
		poolTaints = append(poolTaints, fmt.Sprint(get(tt, "key"), "=", get(tt, "value"), ":", get(tt, "effect")))
	}
	if fmt.Sprint(poolTaints) != fmt.Sprint(groupTaints) || !hasTaint(get(tmpl, "spec", "taints"), "nvidia.com/gpu", "present", "NoSchedule") {
		t.Errorf("NodePool taints %v, want the node group's %v with nvidia.com/gpu=present:NoSchedule", poolTaints, groupTaints)
	}
	ref := get(tmpl, "spec", "nodeClassRef")
	if get(ref, "group") != "karpenter.k8s.aws" || get(ref, "kind") != "EC2NodeClass" || get(ref, "name") != cluster+"-gpu" {
		t.Errorf("NodePool nodeClassRef %v, want the pool's EC2NodeClass", ref)
	}
	limits, _ := get(np, "spec", "limits").(map[string]any)
	disruption := get(np, "spec", "disruption")
	annotations, _ := get(np, "metadata", "annotations").(map[string]any)
	for what, got := range map[string][2]any{
		// expireAfter Never: expiry ignores karpenter.sh/do-not-disrupt (/concepts/disruption/,
		// "Pod-Level Controls") and would take a node from a running rank.
		"expireAfter":         {get(tmpl, "spec", "expireAfter"), "Never"},
		"limits.nodes":        {limits["nodes"], "4"},
		"limits.gpu":          {limits["nvidia.com/gpu"], "32"},
		"consolidationPolicy": {get(disruption, "consolidationPolicy"), "WhenEmpty"},
		"consolidateAfter":    {get(disruption, "consolidateAfter"), "30m"},
		"budget":              {get(disruption, "budgets", "[0]", "nodes"), "100%"},
		"waitFor":             {annotations["pulumi.com/waitFor"], "condition=Ready"},
	} {
		if got[0] != got[1] {
			t.Errorf("NodePool %s = %v, want %v", what, got[0], got[1])
		}
	}

	// The towers wait for their NodePool (Ready once Karpenter has resolved its class) and keep
	// their nodes while they run.
	if !waitsForURN(rec, rec.one(t, tStatefulSet, "towers"), tKarpenterPool+"::karpenter-gpu") {
		t.Error("the towers do not wait for their NodePool")
	}
	checkKeepNode(t, rec)
}

// TestEKSPoolAtZeroSpot: a Spot pool at zero asks Karpenter for Spot capacity, and its nodes carry
// the label EKS puts on a managed group's Spot nodes
// (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html: "eks.amazonaws.com/
// capacityType: SPOT"), which the pods that must not run on Spot avoid. A spread pool may be in
// any of the cluster's zones and has no placement group.
func TestEKSPoolAtZeroSpot(t *testing.T) {
	rec := cloudRec(t, "aws", map[string]string{"nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","minNodes":0,"maxNodes":2,"spot":true,"placement":"spread","fabric":"off"},` +
		`{"name":"cpu","machineType":"m6i.4xlarge","nodes":1},{"name":"ops","machineType":"m6i.large","nodes":1}]`,
		"towers": `{"count":2,"gpusPerTower":8,"pool":"gpu","launcherPool":"ops","crossZone":true}`})
	np := inputs(rec.one(t, tKarpenterPool, "karpenter-gpu"))
	reqs := fmt.Sprint(get(np, "spec", "template", "spec", "requirements"))
	if !strings.Contains(reqs, "values:[spot]") || !strings.Contains(reqs, "values:[us-east-1a us-east-1b]") {
		t.Errorf("spot spread NodePool requirements %s: want capacity type spot, the cluster's zones", reqs)
	}
	if get(np, "spec", "template", "metadata", "labels", "eks.amazonaws.com/capacityType") != "SPOT" {
		t.Errorf("spot NodePool labels %v: want eks.amazonaws.com/capacityType=SPOT", get(np, "spec", "template", "metadata", "labels"))
	}
	if class := inputs(rec.one(t, tEC2NodeClass, "karpenter-gpu-class")); get(class, "spec", "placementGroupSelector") != nil {
		t.Errorf("a spread pool in a placement group: %v", get(class, "spec", "placementGroupSelector"))
	}
	// One fixed node per pool: two controller replicas.
	for _, c := range rec.charts {
		if c["chart"] == "oci://public.ecr.aws/karpenter/karpenter" && get(c, "values", "replicas") != 2.0 {
			t.Errorf("Karpenter replicas %v, want 2", get(c, "values", "replicas"))
		}
	}
}

// TestEKSPoolAtZeroRefused: what Karpenter cannot give a pool at zero is refused with its key
// before anything is registered: devices its instance types do not have (Karpenter launches a
// node only for resources it knows the instance type has: https://karpenter.sh/v1.13/concepts/scheduling/,
// "Resource requests"), a starting size (it makes nodes for pending pods only), a node group's
// name (a pool's replace key has a default, so it is left alone), and a stack with no node for Karpenter's controller (the chart keeps it off Karpenter's
// nodes and tolerates none of Kolotoc's taints: charts/karpenter/values.yaml affinity, tolerations).
func TestEKSPoolAtZeroRefused(t *testing.T) {
	cpu := `,{"name":"cpu","machineType":"m6i.4xlarge","nodes":1}`
	for _, tc := range []struct{ name, pools, key, value, why string }{
		{"devices", `{"name":"gpu","machineType":"p4d.24xlarge","minNodes":0,"maxNodes":2,"devices":{"hugepages-2Mi":"1Gi"}}` + cpu,
			"nodePools[0].devices", "hugepages-2Mi", "resources its instance type has"},
		{"nodes", `{"name":"gpu","machineType":"p4d.24xlarge","minNodes":0,"nodes":1,"maxNodes":2}` + cpu,
			"nodePools[0].nodes", "1", "only for a pod that needs it"},
		{"cloudName", `{"name":"gpu","machineType":"p4d.24xlarge","minNodes":0,"maxNodes":2,"cloudName":"gpu-a"}` + cpu,
			"nodePools[0].cloudName", "gpu-a", "a pool at zero has none"},
		{"no node for the controller", `{"name":"gpu","machineType":"p4d.24xlarge","minNodes":0,"maxNodes":2},{"name":"cpu","machineType":"p4d.24xlarge","nodes":1}`,
			"nodePools[0].minNodes", "0", "Karpenter's controller runs on a node it does not make"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := configErrors(t, cloudRaw(t, "aws", map[string]string{
				"nodePools": "[" + tc.pools + "]", "towers": `{"count":1,"gpusPerTower":8,"pool":"gpu","launcherPool":"cpu"}`,
			}))
			e, ok := errs[tc.key]
			if !ok || e.Value != tc.value || !strings.Contains(e.Msg, tc.why) || !strings.Contains(e.Msg, "allowed") {
				t.Errorf("errors %v: want %s = %s refused because %q, saying what is allowed", errs, tc.key, tc.value, tc.why)
			}
		})
	}
}

// TestEKSPoolAtZeroExistingSubnets: with cluster.vpcId and subnetIds a compact pool at zero runs
// in the first subnet, as its node group would (its zone is the subnet's, unknown to the stack):
// the EC2NodeClass selects that subnet by ID and the NodePool names no zone (Karpenter launches
// only into the class's subnets: https://karpenter.sh/v1.13/concepts/nodeclasses/,
// "spec.subnetSelectorTerms").
func TestEKSPoolAtZeroExistingSubnets(t *testing.T) {
	ov := withCluster(t, "aws", map[string]any{"zones": nil, "vpcId": "vpc-0abc", "subnetIds": []string{"subnet-a", "subnet-b"}})
	ov["nodePools"] = eksAtZero["nodePools"]
	rec := cloudRec(t, "aws", ov)
	class := inputs(rec.one(t, tEC2NodeClass, "karpenter-gpu-class"))
	if got := fmt.Sprint(get(class, "spec", "subnetSelectorTerms")); got != "[map[id:subnet-a]]" {
		t.Errorf("EC2NodeClass subnets %s, want the first of cluster.subnetIds", got)
	}
	reqs := fmt.Sprint(get(inputs(rec.one(t, tKarpenterPool, "karpenter-gpu")), "spec", "template", "spec", "requirements"))
	if strings.Contains(reqs, "topology.kubernetes.io/zone") {
		t.Errorf("NodePool requirements %s name a zone the stack does not know", reqs)
	}
}
