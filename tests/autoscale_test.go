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

const (
	tAdmissionCheck     = "kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck"
	tProvisioningConfig = "kubernetes:kueue.x-k8s.io/v1beta2:ProvisioningRequestConfig"
)

// queuedGKE is a gcp stack whose GPU pool sits at zero and comes through GKE's queued
// provisioning, with queue's extra keys (JSON members) added.
func queuedGKE(queueExtra string) map[string]string {
	return map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","zones":["us-central1-a"],"minNodes":0,"maxNodes":2},` +
			`{"name":"cpu","machineType":"n2-standard-16","zones":["us-central1-a"]}]`,
		"towers": `{"count":2,"gpusPerTower":8}`,
		"queue":  `{"type":"kueue","provisioning":"queued"` + queueExtra + `}`,
	}
}

// TestGKEQueuedProvisioning: with queue.provisioning: queued the GPU pool is a node pool of GKE's
// queued provisioning (Dynamic Workload Scheduler), as GKE's guide creates one
// (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest: gcloud container
// node-pools create --enable-queued-provisioning --accelerator ...,gpu-driver-version=...
// --enable-autoscaling --num-nodes=0 --total-max-nodes --location-policy=ANY
// --reservation-affinity=none --no-enable-autorepair), and the stack's ClusterQueue admits a
// workload only once Kueue's ProvisioningRequest admission check has all its GPU nodes: an
// AdmissionCheck of controller kueue.x-k8s.io/provisioning-request whose ProvisioningRequestConfig
// has class queued-provisioning.gke.io and managedResources nvidia.com/gpu (GKE's Kueue setup
// there, and in https://docs.cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute),
// maxRunDurationSeconds from queue.maxRunDuration, the check named in the ClusterQueue's
// admissionChecksStrategy for its flavor (Kueue v0.17 apis/kueue/v1beta2 clusterqueue_types.go).
// On the old code queue.provisioning was no key: none of it was made.
func TestGKEQueuedProvisioning(t *testing.T) {
	rec, outs := deployOutputs(t, cloudRaw(t, "prod", queuedGKE(`,"maxRunDuration":"24h"`)))
	// The poolBounds output says which pool comes through queued provisioning.
	bounds := fmt.Sprint(outs["poolBounds"].value)
	if !strings.Contains(bounds, "gpu:map[autoscaled:true maxNodes:2 minNodes:0 nodes:0 provisioning:queued") || strings.Count(bounds, "provisioning") != 1 {
		t.Errorf("poolBounds %s: want the GPU pool's provisioning queued, and no other pool's", bounds)
	}
	np := inputs(rec.one(t, tGKENodePool, "cluster-gpu"))
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"queuedProvisioning", "enabled"}, true},                                                                  // --enable-queued-provisioning
		{[]string{"initialNodeCount"}, 0.0},                                                                                // --num-nodes=0
		{[]string{"autoscaling", "totalMinNodeCount"}, 0.0},                                                                // --enable-autoscaling from zero
		{[]string{"autoscaling", "totalMaxNodeCount"}, 2.0},                                                                // --total-max-nodes (maxNodes)
		{[]string{"autoscaling", "locationPolicy"}, "ANY"},                                                                 // --location-policy=ANY
		{[]string{"autoscaling", "minNodeCount"}, nil},                                                                     // totals, not per zone
		{[]string{"autoscaling", "maxNodeCount"}, nil},                                                                     //
		{[]string{"management", "autoRepair"}, false},                                                                      // --no-enable-autorepair
		{[]string{"nodeConfig", "reservationAffinity", "consumeReservationType"}, "NO_RESERVATION"},                        // --reservation-affinity=none
		{[]string{"nodeConfig", "guestAccelerators", "[0]", "gpuDriverInstallationConfig", "gpuDriverVersion"}, "DEFAULT"}, // gpu-driver-version
		{[]string{"placementPolicy"}, nil},                                                                                 // no compact placement policy on a queued pool
	} {
		if got := get(np, c.path...); got != c.want {
			t.Errorf("queued GPU pool %s = %v, want %v", strings.Join(c.path, "."), got, c.want)
		}
	}
	if !hasTaint(get(np, "nodeConfig", "taints"), "nvidia.com/gpu", "present", "NO_SCHEDULE") {
		t.Errorf("queued GPU pool lost the GPU taint: %v", get(np, "nodeConfig", "taints"))
	}
	// The CPU pool is no queued pool: its nodes are there for the launcher and the system pods.
	cpu := inputs(rec.one(t, tGKENodePool, "cluster-cpu"))
	if get(cpu, "queuedProvisioning") != nil || get(cpu, "management", "autoRepair") != true {
		t.Errorf("CPU pool: queuedProvisioning %v, autoRepair %v; want none and on", get(cpu, "queuedProvisioning"), get(cpu, "management", "autoRepair"))
	}

	cq := inputs(rec.one(t, tClusterQueue, "queue-cluster"))
	ns := get(cq, "metadata", "name")
	check := inputs(rec.one(t, tAdmissionCheck, "queue-check"))
	config := inputs(rec.one(t, tProvisioningConfig, "queue-provisioning"))
	for what, c := range map[string]struct {
		obj  any
		path []string
		want any
	}{
		"AdmissionCheck name":                 {check, []string{"metadata", "name"}, ns},
		"AdmissionCheck controllerName":       {check, []string{"spec", "controllerName"}, "kueue.x-k8s.io/provisioning-request"},
		"AdmissionCheck parameters.apiGroup":  {check, []string{"spec", "parameters", "apiGroup"}, "kueue.x-k8s.io"},
		"AdmissionCheck parameters.kind":      {check, []string{"spec", "parameters", "kind"}, "ProvisioningRequestConfig"},
		"AdmissionCheck parameters.name":      {check, []string{"spec", "parameters", "name"}, get(config, "metadata", "name")},
		"ProvisioningRequestConfig class":     {config, []string{"spec", "provisioningClassName"}, "queued-provisioning.gke.io"},
		"ProvisioningRequestConfig resources": {config, []string{"spec", "managedResources", "[0]"}, "nvidia.com/gpu"},
		"ProvisioningRequestConfig maxRun":    {config, []string{"spec", "parameters", "maxRunDurationSeconds"}, "86400"}, // 24h
		"ClusterQueue check":                  {cq, []string{"spec", "admissionChecksStrategy", "admissionChecks", "[0]", "name"}, get(check, "metadata", "name")},
		"ClusterQueue check's flavor":         {cq, []string{"spec", "admissionChecksStrategy", "admissionChecks", "[0]", "onFlavors", "[0]"}, get(cq, "spec", "resourceGroups", "[0]", "flavors", "[0]", "name")},
	} {
		if got := get(c.obj, c.path...); got != c.want || got == nil {
			t.Errorf("%s = %v, want %v", what, got, c.want)
		}
	}
	if n := len(get(config, "spec", "managedResources").([]any)); n != 1 {
		t.Errorf("managedResources %v: want nvidia.com/gpu alone (the launcher and CPU workloads need no provisioned node)", get(config, "spec", "managedResources"))
	}
	// The towers still tolerate only the GPU taint and select their pool: GKE's webhook gives the
	// pods that consume a ProvisioningRequest (Kueue's annotation) the queued nodes' selector and
	// toleration (GKE, kubernetes-sigs/kueue#14316).
	checkKeepNode(t, rec)

	// Without maxRunDuration: GKE's maximum, seven days.
	def := deploy(t, cloudRaw(t, "prod", queuedGKE("")))
	if got := get(inputs(def.one(t, tProvisioningConfig, "queue-provisioning")), "spec", "parameters", "maxRunDurationSeconds"); got != "604800" {
		t.Errorf("default maxRunDurationSeconds %v, want 604800 (168h)", got)
	}
}

// TestGKEQueuedProvisioningOff: with the queue but without queued provisioning (and without the
// queue) nothing of it is made: no AdmissionCheck, no ProvisioningRequestConfig, no check on the
// ClusterQueue, no queued node pool (the goldens hold the rest byte for byte).
func TestGKEQueuedProvisioningOff(t *testing.T) {
	for what, ov := range map[string]map[string]string{
		"queue, standard provisioning": queueOn,
		"queue, pool at zero":          {"queue": queueOn["queue"], "nodePools": queuedGKE("")["nodePools"], "towers": queuedGKE("")["towers"]},
		"no queue":                     nil,
	} {
		rec := cloudRec(t, "prod", ov)
		for _, tok := range []string{tAdmissionCheck, tProvisioningConfig} {
			if r := rec.ofType(tok); len(r) != 0 {
				t.Errorf("%s: %s registered: %v", what, tok, r[0].Name)
			}
		}
		if cq := rec.ofType(tClusterQueue); len(cq) > 0 && get(inputs(cq[0]), "spec", "admissionChecksStrategy") != nil {
			t.Errorf("%s: ClusterQueue with admission checks %v", what, get(inputs(cq[0]), "spec", "admissionChecksStrategy"))
		}
		for _, np := range rec.ofType(tGKENodePool) {
			if q := get(inputs(np), "queuedProvisioning"); q != nil {
				t.Errorf("%s: node pool %s with queuedProvisioning %v", what, np.Name, q)
			}
		}
	}
}
