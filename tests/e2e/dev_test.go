//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gpuDev is the dev layout on simulated GPU nodes (the dev stack itself runs on the real node:
// realnode_test.go).
const gpuDev = "examples/gpu-dev/Pulumi.gpu-dev.yaml"

// TestGPUDevStack runs the GPU dev layout through its life on the local cluster: up, checks
// through the Kubernetes API, a quiet preview, a scale-out of the towers, a refused bad config,
// secrets absent from state and outputs, destroy.
func TestGPUDevStack(t *testing.T) {
	t.Parallel() // see doc.go
	s := newStack(t, "e2e-gpudev", gpuDev, nil)
	ns := "kolotoc-" + s.name

	start := time.Now()
	summary := s.up()
	t.Logf("first up: %v in %s", summary, time.Since(start).Round(time.Second))
	if summary["create"] == 0 {
		t.Fatalf("first up created nothing: %v", summary)
	}

	t.Run("towers on GPU nodes and ready", func(t *testing.T) {
		s.sub(t).assertTowers(t, ns, 2, 8)
	})
	t.Run("workloads ready", func(t *testing.T) {
		s.sub(t).assertWorkloadsReady(t, ns)
	})
	t.Run("device plugin on every GPU node and only there", func(t *testing.T) {
		s.sub(t).assertDevicePlugin(t, ns, 2)
	})
	t.Run("outputs", func(t *testing.T) {
		out := s.sub(t).outputs()
		for _, k := range []string{"namespace", "jupyterUrl", "jupyterPortForward", "tensorboardUrl", "daskDashboardUrl",
			"daskSchedulerAddress", "gotoTower", "gotoCarrier", "towerHostnamePattern", "towerHostfile", "launcherLogs"} {
			if out[k] == nil || out[k] == "" {
				t.Errorf("output %s missing", k)
			}
		}
		if out["namespace"] != ns {
			t.Errorf("namespace output %v, want %s", out["namespace"], ns)
		}
		if p := out["towerHostnamePattern"]; p != "tower-{0..1}.tower."+ns+".svc" || out["towerCount"] != float64(2) {
			t.Errorf("towerHostnamePattern = %v, towerCount = %v; want tower-{0..1}.tower.%s.svc and 2", p, out["towerCount"], ns)
		}
	})

	t.Run("second preview changes nothing", func(t *testing.T) {
		s := s.sub(t)
		steps, summary := s.preview()
		if len(steps) != 0 {
			t.Errorf("preview of an unchanged stack has changes: %v (summary %v)", fmtMap(steps), summary)
		}
		if r := s.run("", "preview", "--expect-no-changes"); r.code != 0 {
			t.Errorf("pulumi preview --expect-no-changes exited %d:\n%s", r.code, tail(r.stdout))
		}
	})

	t.Run("a preview copy previews it without its secrets", func(t *testing.T) {
		s.sub(t).assertPreviewCopy(t)
	})

	// The dev GPU pool holds two 8-GPU towers; a third comes with a third GPU node.
	threeTowers := map[string]any{
		"towers":    map[string]any{"count": 3, "gpusPerTower": 8, "pool": "gpu"},
		"nodePools": devPoolsWithGPUNodes(t, 3),
	}
	t.Run("three towers: only the expected updates", func(t *testing.T) {
		s := s.sub(t)
		s.reconfigure(gpuDev, threeTowers)
		steps, _ := s.preview()
		want := map[string]string{
			"kubernetes:kolotoc.dev/v1alpha1:SimulatedNodePool::cluster-gpu": "update",
			"kubernetes:apps/v1:StatefulSet::towers":                         "update",
			"kubernetes:core/v1:ConfigMap::towers-scripts":                   "replace",
			"kubernetes:batch/v1:Job::towers-launcher":                       "replace",
		}
		// Pulumi shows a delete-before-replace as one "replace" step or as its parts.
		for k, op := range steps {
			if op == "delete-replaced" || op == "create-replacement" {
				steps[k] = "replace"
			}
		}
		if fmtMap(steps) != fmtMap(want) {
			t.Errorf("preview steps:\n%s\nwant:\n%s", fmtMap(steps), fmtMap(want))
		}
		s.up()
		s.assertTowers(t, ns, 3, 8)
		s.assertDevicePlugin(t, ns, 3)
	})

	t.Run("more GPUs than the pool has is refused, cluster untouched", func(t *testing.T) {
		s := s.sub(t)
		before := s.snapshot(t, ns)
		s.reconfigure(gpuDev, map[string]any{
			"towers":    map[string]any{"count": 3, "gpusPerTower": 16, "pool": "gpu"},
			"nodePools": devPoolsWithGPUNodes(t, 3),
		})
		r := s.run("", "up", "--yes", "--skip-preview")
		if r.code == 0 {
			t.Fatal("pulumi up accepted 16 GPUs per tower on 8-GPU nodes")
		}
		if !strings.Contains(r.stdout+r.stderr, "kolotoc:towers.gpusPerTower") {
			t.Errorf("error does not name kolotoc:towers.gpusPerTower:\n%s", tail(r.stdout+r.stderr))
		}
		if after := s.snapshot(t, ns); after != before {
			t.Errorf("the cluster changed after a refused config:\nbefore %s\nafter  %s", before, after)
		}
		s.reconfigure(gpuDev, threeTowers)
	})

	t.Run("secrets absent from state and outputs", func(t *testing.T) {
		s := s.sub(t)
		files := s.stateFiles()
		if len(files) == 0 {
			t.Fatal("no state files found")
		}
		for path, text := range files {
			s.assertNoSecrets("state file "+path, text)
		}
		s.assertNoSecrets("pulumi stack output", s.pulumi("stack", "output", "--json"))
	})

	t.Run("destroy leaves nothing", func(t *testing.T) {
		s := s.sub(t)
		s.pulumi("destroy", "--yes", "--skip-preview")
		s.assertGone(t, ns)
	})
}

// assertTowers: `count` tower pods, Ready, each on a GPU node of the gpu pool, requesting gpus.
func (s *stack) assertTowers(t *testing.T, ns string, count, gpus int) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, fmt.Sprintf("%d ready towers", count), 2*time.Minute, func() (bool, string) {
		sts, err := s.kube.AppsV1().StatefulSets(ns).Get(ctx, "tower", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return sts.Status.ReadyReplicas == int32(count) && sts.Status.UpdatedReplicas == int32(count),
			fmt.Sprintf("ready %d updated %d", sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas)
	})
	pods, err := s.kube.CoreV1().Pods(ns).List(ctx, listOpts("app.kubernetes.io/component=tower"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != count {
		t.Fatalf("%d tower pods, want %d", len(pods.Items), count)
	}
	for _, p := range pods.Items {
		if !podReady(&p) {
			t.Errorf("pod %s not Ready: %s", p.Name, p.Status.Phase)
		}
		node, err := s.kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s: node %q: %v", p.Name, p.Spec.NodeName, err)
		}
		capacity := node.Status.Allocatable["nvidia.com/gpu"]
		if node.Labels["kolotoc.dev/pool"] != "gpu" || capacity.Value() < int64(gpus) {
			t.Errorf("pod %s on node %s (pool %q, %s GPUs)", p.Name, node.Name, node.Labels["kolotoc.dev/pool"], capacity.String())
		}
		req := p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]
		if req.Value() != int64(gpus) {
			t.Errorf("pod %s asks %s GPUs, want %d", p.Name, req.String(), gpus)
		}
	}
}

func (s *stack) assertWorkloadsReady(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	sets, err := s.kube.AppsV1().StatefulSets(ns).List(ctx, listOpts(s.selector()))
	if err != nil {
		t.Fatal(err)
	}
	deps, err := s.kube.AppsV1().Deployments(ns).List(ctx, listOpts(s.selector()))
	if err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) < 2 || len(deps.Items) < 2 {
		t.Fatalf("%d StatefulSets and %d Deployments; want towers+carriers and entrypoint+nfs-server", len(sets.Items), len(deps.Items))
	}
	for _, x := range sets.Items {
		if x.Status.ReadyReplicas != *x.Spec.Replicas {
			t.Errorf("StatefulSet %s: %d/%d ready", x.Name, x.Status.ReadyReplicas, *x.Spec.Replicas)
		}
	}
	for _, x := range deps.Items {
		if !deploymentAvailable(&x) {
			t.Errorf("Deployment %s not available: %+v", x.Name, x.Status)
		}
	}
	pvc, err := s.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("shared claim not bound: %v %v", err, pvc)
	}
}

func (s *stack) assertDevicePlugin(t *testing.T, ns string, wantGPUNodes int) {
	t.Helper()
	ctx := context.Background()
	nodes, err := s.kube.CoreV1().Nodes().List(ctx, listOpts(s.selector()))
	if err != nil {
		t.Fatal(err)
	}
	gpuNodes := map[string]bool{}
	for _, n := range nodes.Items {
		if q := n.Status.Allocatable["nvidia.com/gpu"]; q.Value() > 0 {
			gpuNodes[n.Name] = true
		}
	}
	if len(gpuNodes) != wantGPUNodes {
		t.Fatalf("%d GPU nodes of this stack, want %d", len(gpuNodes), wantGPUNodes)
	}
	// The GPU node agents run in their own, privileged namespace (stacks/security.go).
	agents := ns + "-gpu-agents"
	waitFor(t, "the device plugin on every GPU node", time.Minute, func() (bool, string) {
		ds, err := s.kube.AppsV1().DaemonSets(agents).Get(ctx, "nvidia-device-plugin", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ds.Status.NumberReady >= int32(wantGPUNodes), fmt.Sprintf("%d ready", ds.Status.NumberReady)
	})
	pods, err := s.kube.CoreV1().Pods(agents).List(ctx, listOpts("app.kubernetes.io/component=nvidia-device-plugin"))
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]bool{}
	for _, p := range pods.Items {
		if !podReady(&p) {
			t.Errorf("device plugin pod %s not ready", p.Name)
		}
		on[p.Spec.NodeName] = true
	}
	// Exactly this stack's GPU nodes: not its CPU nodes, and not another stack's nodes on the
	// shared local cluster.
	for n := range gpuNodes {
		if !on[n] {
			t.Errorf("no device plugin on GPU node %s", n)
		}
	}
	for n := range on {
		if !gpuNodes[n] {
			t.Errorf("device plugin runs on node %s, which is not a GPU node of this stack", n)
		}
	}
}

// snapshot summarises every object of the namespace by kind, name and resourceVersion.
func (s *stack) snapshot(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	var items []string
	add := func(kind, name, rv string) { items = append(items, kind+"/"+name+"@"+rv) }
	sets, err := s.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range sets.Items {
		add("sts", x.Name, x.ResourceVersion)
	}
	deps, _ := s.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	for _, x := range deps.Items {
		add("deploy", x.Name, x.ResourceVersion)
	}
	cms, _ := s.kube.CoreV1().ConfigMaps(ns).List(ctx, listOpts(s.selector()))
	for _, x := range cms.Items {
		add("cm", x.Name, x.ResourceVersion)
	}
	jobs, _ := s.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	for _, x := range jobs.Items {
		add("job", x.Name, string(x.UID))
	}
	sort.Strings(items)
	return strings.Join(items, " ")
}

// assertGone: no object of the stack is left: namespace, nodes, volume.
func (s *stack) assertGone(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "namespace "+ns+" to be gone", 2*time.Minute, func() (bool, string) {
		_, err := s.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	nodes, err := s.kube.CoreV1().Nodes().List(ctx, listOpts(s.selector()))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("%d nodes of the stack left", len(nodes.Items))
	}
	pvs, err := s.kube.CoreV1().PersistentVolumes().List(ctx, listOpts(s.selector()))
	if err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 0 {
		t.Errorf("%d volumes of the stack left", len(pvs.Items))
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue && d.Status.ObservedGeneration >= d.Generation
		}
	}
	return false
}

// devPoolsWithGPUNodes is the GPU dev layout's node pools with the GPU pool grown to n nodes.
func devPoolsWithGPUNodes(t *testing.T, n int) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, gpuDev))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	pools, _ := doc.Config["kolotoc:nodePools"].([]any)
	for _, p := range pools {
		if m, ok := p.(map[string]any); ok && m["name"] == "gpu" {
			m["nodes"] = n
			return pools
		}
	}
	t.Fatal(gpuDev + " has no pool named gpu")
	return nil
}
