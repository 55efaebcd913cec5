package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kolotoc/components/meta/rendertest"
	"kolotoc/stacks"
)

// withGPUPoolDevices sets nodePools[<gpu>].devices on a layout's raw config.
func withGPUPoolDevices(t *testing.T, raw stacks.Raw, devices map[string]any) stacks.Raw {
	t.Helper()
	var pools []map[string]any
	if err := json.Unmarshal([]byte(raw.Values["kolotoc:nodePools"]), &pools); err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if p["name"] == "gpu" {
			p["devices"] = devices
		}
	}
	b, _ := json.Marshal(pools)
	raw.Values["kolotoc:nodePools"] = string(b)
	return raw
}

// TestTowerResources: towers.resources (the Horovod chart's free-form resources block) reaches
// every tower beside its CPU, memory and GPUs: an RDMA device requested in whole units with the
// limit equal to the request, huge pages with their limit equal to their request and a hugetlbfs
// emptyDir of medium HugePages-<size> on /dev/hugepages-<size> (Kubernetes docs, "Manage
// HugePages"), and ephemeral-storage as given. The simulated GPU nodes advertise the pool's
// devices as capacity, so the scheduler (and `make fit`) accounts for them as a cloud's would.
func TestTowerResources(t *testing.T) {
	raw := layoutRaw(t, 1)
	raw = withGPUPoolDevices(t, raw, map[string]any{"rdma/hca": 1, "hugepages-2Mi": "8Gi"})
	raw.Values["kolotoc:towers"] = `{"count":8,"resources":{"requests":{"rdma/hca":1,"hugepages-2Mi":"2Gi","ephemeral-storage":"50Gi"},"limits":{"ephemeral-storage":"100Gi"}}}`
	rec := deploy(t, raw)
	spec := templateOf(t, rec.one(t, tStatefulSet, "towers")).Spec
	c := spec.Containers[0]
	for _, tc := range []struct{ side, name, want string }{
		{"requests", "rdma/hca", "1"}, {"limits", "rdma/hca", "1"},
		{"requests", "hugepages-2Mi", "2Gi"}, {"limits", "hugepages-2Mi", "2Gi"},
		{"requests", "ephemeral-storage", "50Gi"}, {"limits", "ephemeral-storage", "100Gi"},
		{"requests", "nvidia.com/gpu", "8"}, {"limits", "nvidia.com/gpu", "8"},
	} {
		list := map[string]corev1.ResourceList{"requests": c.Resources.Requests, "limits": c.Resources.Limits}[tc.side]
		if q, ok := list[corev1.ResourceName(tc.name)]; !ok || q.String() != tc.want {
			t.Errorf("tower %s %s = %v, want %s", tc.side, tc.name, q.String(), tc.want)
		}
	}
	var medium, mount string
	for _, v := range spec.Volumes {
		if v.Name == "hugepages-2mi" && v.EmptyDir != nil {
			medium = string(v.EmptyDir.Medium)
		}
	}
	for _, m := range c.VolumeMounts {
		if m.Name == "hugepages-2mi" {
			mount = m.MountPath
		}
	}
	if medium != "HugePages-2Mi" || mount != "/dev/hugepages-2Mi" {
		t.Errorf("huge pages volume medium %v mounted on %v, want HugePages-2Mi on /dev/hugepages-2Mi", medium, mount)
	}
	var capacity string
	for _, n := range rec.simulatedNodes() {
		if node := decode[corev1.Node](t, n); node.Labels["kolotoc.dev/pool"] == "gpu" {
			capacity = node.Annotations["kolotoc.dev/simulated-capacity"]
		}
	}
	var capMap map[string]string
	if err := json.Unmarshal([]byte(capacity), &capMap); err != nil || capMap["rdma/hca"] != "1" || capMap["hugepages-2Mi"] != "8Gi" {
		t.Errorf("simulated GPU nodes' capacity %q, want rdma/hca 1 and hugepages-2Mi 8Gi", capacity)
	}
	// Without the key: nothing but CPU, memory and GPUs, no huge pages volume.
	rec = deploy(t, layoutRaw(t, 1))
	c = templateOf(t, rec.one(t, tStatefulSet, "towers")).Spec.Containers[0]
	if n := len(c.Resources.Requests); n != 3 {
		t.Errorf("default tower requests %v, want cpu, memory and GPUs only", c.Resources.Requests)
	}
}

// TestPerRoleImages: the TF charts' light parameter-server image beside the GPU workers' image
// (tfcluster.<role>.image, default tfcluster.image), and the Horovod chart's master image and
// master.env (towers.launcherImage, default towers.image; towers.launcherEnv, the launcher's only).
func TestPerRoleImages(t *testing.T) {
	raw := workloadsRaw(t, map[string]string{"tfcluster": `{"enabled":true,"ps":{"count":2,"image":"tensorflow/tensorflow:2.17.0"},"workers":{"count":2,"gpus":4}}`})
	rec := deploy(t, raw)
	image := func(name string) string {
		return templateOf(t, rec.one(t, tStatefulSet, name)).Spec.Containers[0].Image
	}
	for name, want := range map[string]string{"tfcluster-ps": "tensorflow/tensorflow:2.17.0", "tfcluster-worker": "tensorflow/tensorflow:2.17.0-gpu", "tfcluster-chief": "tensorflow/tensorflow:2.17.0-gpu"} {
		if got := image(name); got != want {
			t.Errorf("%s image %v, want %s", name, got, want)
		}
	}

	raw = layoutRaw(t, 1)
	raw.Values["kolotoc:towers"] = `{"launcherImage":"horovod/horovod:0.28.1-cpu","launcherEnv":[{"name":"HOROVOD_LOG_LEVEL","value":"debug"}],"env":[{"name":"NCCL_DEBUG","value":"INFO"}]}`
	rec = deploy(t, raw)
	launcher := templateOf(t, rec.one(t, tJob, "towers-launcher")).Spec.Containers[0]
	tower := templateOf(t, rec.one(t, tStatefulSet, "towers")).Spec.Containers[0]
	if launcher.Image != "horovod/horovod:0.28.1-cpu" || tower.Image != "horovod/horovod:0.28.1" {
		t.Errorf("launcher image %v, tower image %v", launcher.Image, tower.Image)
	}
	le, te := envVars(launcher), envVars(tower)
	if _, towerHas := te["HOROVOD_LOG_LEVEL"]; le["HOROVOD_LOG_LEVEL"].Value != "debug" || le["NCCL_DEBUG"].Value != "INFO" || towerHas {
		t.Errorf("launcher env %v, tower env %v: want launcherEnv on the launcher only, env on both", le, te)
	}
}

// TestDataInJob: kolotoc:dataIn is one Job in the stack's namespace that runs the command in its
// image as the workloads' user, with the shared claim mounted and $KOLOTOC_DATA_DIR set to
// <storage.mountPath>/<path>; every training pod (towers and launcher, carriers, elastic workers,
// TF tasks) waits for it, the provider awaiting the Job until it completes, and the entrypoint
// does not (Jupyter is up while the data comes in). Without the key there is no such Job.
func TestDataInJob(t *testing.T) {
	raw := workloadsRaw(t, map[string]string{
		"dataIn": `{"enabled":true,"image":"amazon/aws-cli:2.22.0","command":["aws","s3","sync","s3://bucket/imagenet","$(KOLOTOC_DATA_DIR)"],"path":"datasets/imagenet","run":"v1"}`,
		"towers": `{"enabled":true,"count":2,"gpusPerTower":8}`,
	})
	raw.Values["kolotoc:sshKeySeed"], raw.Secrets["kolotoc:sshKeySeed"] = testSeed, true
	rec := deploy(t, raw)
	job := decode[batchv1.Job](t, rec.one(t, tJob, "data-in"))
	c := job.Spec.Template.Spec.Containers[0]
	if c.Image != "amazon/aws-cli:2.22.0" || job.Namespace != "kolotoc-workloads" {
		t.Errorf("data-in Job image %v namespace %v", c.Image, job.Namespace)
	}
	cmd := c.Command
	if n := len(cmd); n < 5 || cmd[n-5] != "aws" || cmd[n-1] != "$(KOLOTOC_DATA_DIR)" {
		t.Errorf("data-in command %v, want the user's after the wrapper", cmd)
	}
	env := envValues(c)
	if env["KOLOTOC_DATA_DIR"] != "/shared/datasets/imagenet" || env["KOLOTOC_RUN"] != "v1" {
		t.Errorf("data-in env %v", env)
	}
	if job.Spec.Template.Labels["kolotoc.dev/run"] != "v1" {
		t.Errorf("data-in pod labels %v", job.Spec.Template.Labels)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "shared" && m.MountPath == "/shared")
	}
	if !mounted {
		t.Errorf("data-in mounts %v, want the shared claim on /shared", c.VolumeMounts)
	}
	waiters := 0
	for _, r := range rec.sorted() {
		if r.Type != tStatefulSet && r.Type != tJob && r.Type != tDeployment || r.Name == "data-in" || strings.HasPrefix(r.Name, "storage") {
			continue
		}
		waits := waitsForURN(rec, r, "::data-in")
		switch {
		case r.Type == tDeployment && r.Name == "entrypoint":
			if waits {
				t.Errorf("the entrypoint waits for the data-in Job")
			}
		case rendertest.DecodeSome[metav1.PartialObjectMetadata](t, r).Namespace == "kolotoc-workloads" && templateMountsClaim(t, r):
			waiters++
			if !waits {
				t.Errorf("%s %s mounts the claim and does not wait for the data-in Job", r.Type, r.Name)
			}
		}
	}
	if waiters < 6 {
		t.Errorf("only %d training workloads wait for the data-in Job", waiters)
	}
	rec = deploy(t, workloadsRaw(t, nil))
	for _, r := range rec.ofType(tJob) {
		if r.Name == "data-in" {
			t.Error("a data-in Job without kolotoc:dataIn")
		}
	}
}

// TestSentinelsWatchProcesses: sentinels.watchProcesses puts each tower and its sentinel in one
// process namespace (shareProcessNamespace), so that the sentinel sees the tower's processes, as
// the old chart's sentinels watched the machine; by default the tower pod is as before.
func TestSentinelsWatchProcesses(t *testing.T) {
	raw := layoutRaw(t, 1)
	raw.Values["kolotoc:sentinels"] = `{"enabled":true,"watchProcesses":true}`
	spec := templateOf(t, deploy(t, raw).one(t, tStatefulSet, "towers")).Spec
	if !isTrue(spec.ShareProcessNamespace) || len(spec.Containers) != 2 {
		t.Errorf("towers with watching sentinels: shareProcessNamespace %v, %d containers", spec.ShareProcessNamespace, len(spec.Containers))
	}
	raw = layoutRaw(t, 1)
	raw.Values["kolotoc:sentinels"] = `{"enabled":true}`
	if got := templateOf(t, deploy(t, raw).one(t, tStatefulSet, "towers")).Spec.ShareProcessNamespace; got != nil {
		t.Errorf("shareProcessNamespace %v by default", *got)
	}
}

// TestSentinelsWatchGPUs: sentinels.watchGPUs gives each sentinel the URL of its own node's DCGM
// exporter: a Service in the GPU agents' namespace that selects the exporter's pods with
// internalTrafficPolicy Local (Kubernetes' ServiceSpec: the proxy sends a pod's traffic only to
// endpoints on the pod's node, and drops it when there is none, so a sentinel reads its node's
// GPUs and never another node's), and a NetworkPolicy there that admits the towers' pods (the
// sentinels run in them) on the exporter's port. Off by default: none of it.
func TestSentinelsWatchGPUs(t *testing.T) {
	towers := `{"enabled":true,"count":1,"gpusPerTower":8,"pool":"gpu"}`
	rec := deploy(t, withTestSecrets(workloadsRaw(t, nil), map[string]string{"towers": towers, "sentinels": `{"enabled":true,"watchGPUs":true}`}))
	ds := decode[appsv1.DaemonSet](t, rec.one(t, tDaemonSet, "monitoring-dcgm-exporter"))
	agents := ds.Namespace
	exporterLabels := ds.Spec.Template.Labels
	svc := decode[corev1.Service](t, rec.one(t, tService, "monitoring-dcgm-node"))
	var policy corev1.ServiceInternalTrafficPolicy
	if p := svc.Spec.InternalTrafficPolicy; p != nil {
		policy = *p
	}
	if policy != corev1.ServiceInternalTrafficPolicyLocal || svc.Namespace != agents {
		t.Errorf("node metrics Service: internalTrafficPolicy %q in %v; want Local in the exporter's namespace %v", policy, svc.Namespace, agents)
	}
	sel := svc.Spec.Selector
	for k, v := range sel {
		if exporterLabels[k] != v {
			t.Errorf("node metrics Service selects %s=%v, the exporter's pods have %v", k, v, exporterLabels[k])
		}
	}
	exporterPorts := ds.Spec.Template.Spec.Containers[0].Ports
	if len(sel) == 0 || len(svc.Spec.Ports) == 0 || len(exporterPorts) == 0 || svc.Spec.Ports[0].TargetPort.IntValue() != int(exporterPorts[0].ContainerPort) {
		t.Fatalf("node metrics Service: selector %v, ports %+v; want the exporter's pods on its metrics port", sel, svc.Spec.Ports)
	}
	url := fmt.Sprintf("http://%s.%s.svc:%v/metrics", svc.Name, agents, svc.Spec.Ports[0].Port)
	tower := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, "towers"))
	sentinel := containerNamed(t, tower.Spec.Template.Spec, "sentinel")
	if got := envValues(sentinel)["KOLOTOC_NODE_GPU_METRICS"]; got != url {
		t.Errorf("sentinel KOLOTOC_NODE_GPU_METRICS = %q, want %s", got, url)
	}
	var allow *networkingv1.NetworkPolicy
	for _, r := range rec.ofType(tNetworkPolicy) {
		if np := decode[networkingv1.NetworkPolicy](t, r); np.Name == "dcgm-node-watch" && np.Namespace == agents {
			allow = &np
		}
	}
	if allow == nil {
		t.Fatal("no NetworkPolicy dcgm-node-watch in the agents' namespace: the default deny drops the sentinels' reads")
	}
	if len(allow.Spec.Ingress) == 0 || len(allow.Spec.Ingress[0].From) == 0 || len(allow.Spec.Ingress[0].Ports) == 0 {
		t.Fatalf("dcgm-node-watch ingress %+v: want one peer and one port", allow.Spec.Ingress)
	}
	from, port := allow.Spec.Ingress[0].From[0], allow.Spec.Ingress[0].Ports[0]
	if from.PodSelector == nil || from.PodSelector.MatchLabels["app.kubernetes.io/component"] != tower.Spec.Template.Labels["app.kubernetes.io/component"] ||
		from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != tower.Namespace ||
		port.Port == nil || port.Port.IntValue() != svc.Spec.Ports[0].TargetPort.IntValue() {
		t.Errorf("dcgm-node-watch admits %+v on %+v; want the towers' pods of %v on the exporter's port", from, port, tower.Namespace)
	}

	off := deploy(t, withTestSecrets(workloadsRaw(t, nil), map[string]string{"towers": towers, "sentinels": `{"enabled":true}`}))
	for _, r := range off.ofType(tService) {
		if r.Name == "monitoring-dcgm-node" {
			t.Error("a node metrics Service although no sentinel watches GPUs")
		}
	}
	for _, c := range containersOf(templateOf(t, off.one(t, tStatefulSet, "towers")).Spec) {
		if _, ok := envVars(c)["KOLOTOC_NODE_GPU_METRICS"]; ok {
			t.Errorf("container %s told of GPU metrics although no sentinel watches GPUs", c.Name)
		}
	}
}
