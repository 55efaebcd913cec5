package tests

import (
	"fmt"
	"strings"
	"testing"
)

// TestGKEPoolAtZero: a GKE pool with minNodes: 0 is a node pool whose cluster autoscaler may take
// it down to zero nodes and grow it to maxNodes, starting with none (GKE: "Cluster autoscaler
// supports scaling node pools down to zero nodes"; min_node_count may be 0 and total counts are
// per zone: https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler#minimum_and_maximum_node_pool_size).
// On the old code minNodes: 0 meant "the same as nodes": the pool never went below it.
func TestGKEPoolAtZero(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "prod", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","zones":["us-central1-a"],"minNodes":0,"maxNodes":2},` +
			`{"name":"cpu","machineType":"n2-standard-16","zones":["us-central1-a"]}]`,
		"towers": `{"count":2,"gpusPerTower":8}`,
	}))
	np := inputs(rec.one(t, tGKENodePool, "cluster-gpu"))
	if get(np, "autoscaling", "minNodeCount") != 0.0 || get(np, "autoscaling", "maxNodeCount") != 2.0 || get(np, "initialNodeCount") != 0.0 {
		t.Errorf("GPU pool at zero: autoscaling %v, initialNodeCount %v; want 0..2 from 0",
			get(np, "autoscaling"), get(np, "initialNodeCount"))
	}
	if !hasTaint(get(np, "nodeConfig", "taints"), "nvidia.com/gpu", "present", "NO_SCHEDULE") {
		t.Errorf("GPU pool at zero lost the GPU taint: %v", get(np, "nodeConfig", "taints"))
	}
	checkKeepNode(t, rec)
}

// TestAKSPoolAtZero: an AKS user pool with minNodes: 0 has the cluster autoscaler on from zero
// ("You can scale user node pools to zero"; enableAutoScaling with minCount 0:
// https://learn.microsoft.com/en-us/azure/aks/scale-cluster#scale-user-node-pools-to-0).
// On the old code minNodes: 0 gave minCount = nodes.
func TestAKSPoolAtZero(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "azure", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"Standard_ND96asr_v4","minNodes":0,"maxNodes":2},` +
			`{"name":"cpu","machineType":"Standard_D16s_v5"}]`,
		"towers": `{"count":2,"gpusPerTower":8}`,
	}))
	ap := inputs(rec.one(t, tAgentPool, "cluster-gpu"))
	if get(ap, "enableAutoScaling") != true || get(ap, "minCount") != 0.0 || get(ap, "maxCount") != 2.0 || get(ap, "count") != 0.0 {
		t.Errorf("GPU pool at zero: enableAutoScaling %v, minCount %v, maxCount %v, count %v; want on, 0..2 from 0",
			get(ap, "enableAutoScaling"), get(ap, "minCount"), get(ap, "maxCount"), get(ap, "count"))
	}
	checkKeepNode(t, rec)
}

// checkKeepNode: the towers on an autoscaled pool carry both autoscalers' annotations, so a
// scale-down never takes a running rank's node.
func checkKeepNode(t *testing.T, rec *recorder) {
	t.Helper()
	sts := inputs(rec.one(t, tStatefulSet, "towers"))
	ann := fmt.Sprint(get(sts, "spec", "template", "metadata", "annotations"))
	if !strings.Contains(ann, "karpenter.sh/do-not-disrupt:true") || !strings.Contains(ann, "cluster-autoscaler.kubernetes.io/safe-to-evict:false") {
		t.Errorf("towers on an autoscaled pool: annotations %v, want karpenter.sh/do-not-disrupt=true and safe-to-evict=false", ann)
	}
}
