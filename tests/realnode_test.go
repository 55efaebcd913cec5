package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/stacks"
)

// The dev stack runs for real on the local cluster's real node (kolotoc.dev/real-node=true: a
// kubelet with containerd, 2 CPUs, no GPU). These tests check what that needs of the rendering.

// renderedPod is one pod a layout starts: its node selector, tolerations and summed container
// requests.
type renderedPod struct {
	name        string
	selector    map[string]string
	tolerations []corev1.Toleration
	cpuMilli    int64
	memory      int64
	gpus        int64
}

// renderedPods lists every pod the registered workloads start, replicas counted.
func renderedPods(t *testing.T, rec *recorder) []renderedPod {
	t.Helper()
	var out []renderedPod
	for _, p := range podTemplates(t, rec) {
		if strings.HasPrefix(p.owner, tDaemonSet) {
			t.Fatalf("%s: a DaemonSet's pods depend on the nodes; count them separately", p.owner)
		}
		replicas := 1
		kind, name, _ := strings.Cut(p.owner, " ")
		var n *int32
		switch kind {
		case tDeployment:
			n = decode[appsv1.Deployment](t, rec.one(t, kind, name)).Spec.Replicas
		case tStatefulSet:
			n = decode[appsv1.StatefulSet](t, rec.one(t, kind, name)).Spec.Replicas
		}
		if n != nil {
			replicas = int(*n)
		}
		rp := renderedPod{tolerations: p.spec.Tolerations, selector: p.spec.NodeSelector}
		// A pod's request, as the scheduler counts it: its containers' together, or its largest
		// init container's (they run one at a time, before the containers), whichever is more.
		requests := func(c corev1.Container) (cpu, mem, gpus int64) {
			req := c.Resources.Requests
			return req.Cpu().MilliValue(), req.Memory().Value(), req.Name("nvidia.com/gpu", k8sresource.DecimalSI).Value()
		}
		for _, c := range p.spec.Containers {
			cpu, mem, gpus := requests(c)
			rp.cpuMilli, rp.memory, rp.gpus = rp.cpuMilli+cpu, rp.memory+mem, rp.gpus+gpus
		}
		for _, c := range p.spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				t.Fatalf("%s: sidecar init containers are not counted here", p.owner)
			}
			cpu, mem, gpus := requests(c)
			rp.cpuMilli, rp.memory, rp.gpus = max(rp.cpuMilli, cpu), max(rp.memory, mem), max(rp.gpus, gpus)
		}
		for i := 0; i < replicas; i++ {
			rp.name = fmt.Sprintf("%s-%d", p.owner, i)
			out = append(out, rp)
		}
	}
	return out
}

// TestDevOnTheRealNode: the dev stack registers no Node (its pool is the real node), and every
// pod selects the real node by its label alone, requests no GPU and tolerates no GPU taint.
func TestDevOnTheRealNode(t *testing.T) {
	rec := deploy(t, layoutRaw(t, 0))
	if n := rec.ofType(tPool); len(n) != 0 {
		t.Errorf("%d simulated node pools registered for a real pool; the real node is the cluster's own", len(n))
	}
	for _, r := range rec.sorted() {
		if r.Type == "kolotoc:cluster:Simulated" {
			t.Error("a simulated cluster component without simulated pools")
		}
	}
	pods := renderedPods(t, rec)
	if len(pods) < 5 {
		t.Fatalf("only %d pods", len(pods))
	}
	for _, p := range pods {
		if got := fmt.Sprint(p.selector); got != "map[kolotoc.dev/real-node:true]" {
			t.Errorf("%s selects %s, want the real node's label only", p.name, got)
		}
		if p.gpus != 0 || len(p.tolerations) != 0 {
			t.Errorf("%s requests %d GPUs, tolerates %v; the real node has no GPU", p.name, p.gpus, p.tolerations)
		}
	}
}

// TestDevFitsTheRealNode: every pod of dev at once (all replicas: towers with their sentinels,
// the launcher, carriers, the entrypoint) requests at most 1.6 of the real node's 2 cores, the
// rest kept for the kubelet, containerd and CoreDNS, and at most 10Gi.
func TestDevFitsTheRealNode(t *testing.T) {
	const (
		nodeMilliCPU = 2000
		headroom     = 400 // milli-CPU for the node's own daemons
		maxMemory    = 10 << 30
	)
	var cpu, mem int64
	var parts []string
	for _, p := range renderedPods(t, deploy(t, layoutRaw(t, 0))) {
		cpu += p.cpuMilli
		mem += p.memory
		parts = append(parts, fmt.Sprintf("%s %dm %dMi", p.name, p.cpuMilli, p.memory>>20))
	}
	if cpu > nodeMilliCPU-headroom || mem > maxMemory {
		t.Errorf("dev requests %dm CPU and %dMi in all; the real node allows %dm and %dMi:\n  %s",
			cpu, mem>>20, nodeMilliCPU-headroom, maxMemory>>20, strings.Join(parts, "\n  "))
	}
	cfg, err := stacks.Load(layoutRaw(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	// The pool's figures, which the program's own checks use, are within the real node.
	p := cfg.Pool("node")
	if p == nil {
		t.Fatal("no pool node")
	}
	if poolMem := k8sresource.MustParse(p.Memory); !p.Real || int64(p.CPUs)*1000 > nodeMilliCPU || poolMem.Value() < mem {
		t.Errorf("pool node = %+v for %dm, %dMi of requests", p, cpu, mem>>20)
	}
}

// TestLocalStorage: storage.type local is one directory of the node, shared by every pod through
// the usual claim: a hostPath volume (created if missing), ReadWriteMany, no storage class,
// Retain, named after the namespace and bound to the claim; no NFS server runs.
func TestLocalStorage(t *testing.T) {
	rec := deploy(t, layoutRaw(t, 0))
	pv := decode[corev1.PersistentVolume](t, rec.one(t, tPV, "storage"))
	want := corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: "/var/lib/kolotoc/kolotoc-dev/shared", Type: ptr(corev1.HostPathDirectoryOrCreate),
		}},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		StorageClassName:              "",
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		ClaimRef:                      &corev1.ObjectReference{Name: stacks.StorageName, Namespace: "kolotoc-dev"},
		Capacity:                      pv.Spec.Capacity,
		MountOptions:                  nil, // refused on hostPath volumes
	}
	if pv.Name != "kolotoc-dev-shared" {
		t.Errorf("volume %s, want kolotoc-dev-shared", pv.Name)
	}
	if d := cmp.Diff(want, pv.Spec); d != "" {
		t.Errorf("volume spec (-want +got):\n%s", d)
	}
	pvc := decode[corev1.PersistentVolumeClaim](t, rec.one(t, tPVC, "storage"))
	if pvc.Spec.VolumeName != "kolotoc-dev-shared" || len(pvc.Spec.AccessModes) == 0 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim: %+v", pvc.Spec)
	}
	for _, d := range rec.ofType(tDeployment) {
		if d.Name == "storage-server" {
			t.Error("an NFS server beside local storage")
		}
	}
	for _, p := range podTemplates(t, rec) {
		mounted := false
		for _, v := range p.spec.Volumes {
			mounted = mounted || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == stacks.StorageName)
			if v.HostPath != nil {
				t.Errorf("%s mounts a host path itself; only the volume is one", p.owner)
			}
		}
		if !mounted {
			t.Errorf("%s does not mount the shared claim", p.owner)
		}
	}
}

// TestJupyterNotebook: jupyterUI notebook runs the classic Notebook server on the shared claim,
// its token from the Secret (JUPYTER_TOKEN), readiness on /api.
func TestJupyterNotebook(t *testing.T) {
	rec := deploy(t, layoutRaw(t, 0))
	jupyter := containerNamed(t, templateOf(t, rec.one(t, tDeployment, "entrypoint")).Spec, "jupyter")
	// dev runs Jupyter as kolotoc:runAsUser, not root: no --allow-root.
	want := []string{"jupyter", "notebook", "--no-browser", "--NotebookApp.ip=0.0.0.0",
		"--NotebookApp.port=8888", "--NotebookApp.notebook_dir=/shared"}
	if got := jupyter.Args; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("args %v, want %v", got, want)
	}
	if ref := envVars(jupyter)["JUPYTER_TOKEN"].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "entrypoint-jupyter" {
		t.Errorf("JUPYTER_TOKEN from %+v, want the Secret entrypoint-jupyter", ref)
	}
	if pr := jupyter.ReadinessProbe; pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/api" {
		t.Errorf("readiness probe %+v", pr)
	}
}

// TestDaskWorkerPorts: every dask worker's --worker-port and --nanny-port are a single port or a
// range whose last port is above its first; dask refuses "40000:40000", so a one-process worker
// (every sentinel) must be given the one port.
func TestDaskWorkerPorts(t *testing.T) {
	raws := map[string]stacks.Raw{"workloads": workloadsRaw(t, nil)}
	for i, l := range layouts {
		raws[l.name] = layoutRaw(t, i)
	}
	for name, raw := range raws {
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, p := range podTemplates(t, deploy(t, raw)) {
				for _, c := range containersOf(p.spec) {
					args := c.Args
					if len(args) < 2 || args[0] != "dask" || args[1] != "worker" {
						continue
					}
					for i, a := range args {
						if a != "--worker-port" && a != "--nanny-port" || i+1 >= len(args) {
							continue
						}
						n++
						var first, last int
						if _, err := fmt.Sscanf(args[i+1], "%d:%d", &first, &last); err == nil && last <= first {
							t.Errorf("%s %s: %s %s is a range dask refuses", p.owner, c.Name, a, args[i+1])
						}
					}
				}
			}
			if n == 0 {
				t.Error("no dask worker ports found")
			}
		})
	}
}
