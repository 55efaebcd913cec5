package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads" // the workloads' entries, as main.go registers them
)

const (
	tStatefulSet = "kubernetes:apps/v1:StatefulSet"
	tDaemonSet   = "kubernetes:apps/v1:DaemonSet"
	tDeployment  = "kubernetes:apps/v1:Deployment"
	tJob         = "kubernetes:batch/v1:Job"
	tPool        = "kubernetes:kolotoc.dev/v1alpha1:SimulatedNodePool"
	tConfigMap   = "kubernetes:core/v1:ConfigMap"
	tSecret      = "kubernetes:core/v1:Secret"
	tPV          = "kubernetes:core/v1:PersistentVolume"
	tPVC         = "kubernetes:core/v1:PersistentVolumeClaim"
	tProvider    = "pulumi:providers:kubernetes"
)

// layouts are the committed stacks as the tests deploy them. dev runs CPU towers on the local
// cluster's real node; prod is a GKE stack, checked here the way design.md prescribes: the same
// pools on the simulated cloud, node for node.
var layouts = []struct {
	name, stack string
	towers      int
	gpus        int               // per tower; 0: CPU towers
	slots       int               // per tower in the hostfile
	selector    map[string]string // the towers' node selector
	overrides   map[string]string
}{
	{name: "dev", stack: "dev", towers: 2, gpus: 0, slots: 1, selector: map[string]string{"kolotoc.dev/real-node": "true"}},
	{name: "prod-simulated", stack: "prod", towers: 8, gpus: 8, slots: 8, selector: map[string]string{"kolotoc.dev/pool": "gpu", "kolotoc.dev/cluster": "kolotoc-prod"},
		overrides: map[string]string{"cloud": "simulated", "cluster": `{"name":"kolotoc-prod"}`}},
}

func layoutRaw(t *testing.T, i int) stacks.Raw {
	l := layouts[i]
	ov := map[string]string{}
	for k, v := range l.overrides {
		ov[k] = v
	}
	kc := fakeKubeconfig(t)
	cluster := map[string]any{}
	if c, ok := ov["cluster"]; ok {
		_ = json.Unmarshal([]byte(c), &cluster)
	}
	cluster["kubeconfig"] = kc
	b, _ := json.Marshal(cluster)
	ov["cluster"] = string(b)
	return stackRaw(t, l.stack, ov)
}

// TestGolden snapshots everything each stack registers. Regenerate on purpose only:
// UPDATE_GOLDEN=1 go test ./tests -run TestGolden
func TestGolden(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			got := goldenYAML(t, deploy(t, layoutRaw(t, i)))
			compareGolden(t, filepath.Join("testdata", l.name+".golden.yaml"), got)
			for _, secret := range []string{testPassword, testSeed, "kubeconfig-token-that-must-stay-secret", "PRIVATE KEY"} {
				if bytes.Contains(got, []byte(secret)) {
					t.Errorf("golden output contains secret material %q", secret)
				}
			}
		})
	}
}

// TestDeterministic: the same config registers byte-identical inputs, so a second `pulumi up`
// has nothing to change.
func TestDeterministic(t *testing.T) {
	raw := layoutRaw(t, 0)
	a := goldenYAML(t, deploy(t, raw))
	b := goldenYAML(t, deploy(t, raw))
	if d := cmp.Diff(string(a), string(b)); d != "" {
		t.Errorf("two runs of the same config differ:\n%s", d)
	}
}

func TestTowers(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			rec := deploy(t, layoutRaw(t, i))
			sts := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, "towers"))
			if got := sts.Spec.Replicas; got == nil || int(*got) != l.towers {
				t.Errorf("replicas = %v, want %d", got, l.towers)
			}
			if got := sts.Spec.PodManagementPolicy; got != appsv1.ParallelPodManagement {
				t.Errorf("podManagementPolicy = %v", got)
			}
			pod := sts.Spec.Template.Spec
			tower := pod.Containers[0]
			if tower.Name != "tower" {
				t.Fatalf("first container is %v", tower.Name)
			}
			want := fmt.Sprint(l.gpus)
			if l.gpus == 0 {
				want = "none" // CPU towers request no GPU and tolerate no GPU taint
			}
			gpus := func(list corev1.ResourceList) string {
				if q, ok := list["nvidia.com/gpu"]; ok {
					return q.String()
				}
				return "none"
			}
			if got := gpus(tower.Resources.Limits); got != want {
				t.Errorf("GPU limit = %v, want %v", got, want)
			}
			if got := gpus(tower.Resources.Requests); got != want {
				t.Errorf("GPU request = %v, want %v", got, want)
			}
			if l.gpus > 0 && (len(pod.Tolerations) == 0 || pod.Tolerations[0].Key != "nvidia.com/gpu" || pod.Tolerations[0].Effect != corev1.TaintEffectNoSchedule) {
				t.Errorf("towers do not tolerate the GPU taint: %v", pod.Tolerations)
			}
			if l.gpus == 0 && pod.Tolerations != nil {
				t.Errorf("CPU towers tolerate %v", pod.Tolerations)
			}
			if got, want := fmt.Sprint(pod.NodeSelector), fmt.Sprint(l.selector); got != want {
				t.Errorf("towers select %v, want %v", got, want)
			}

			hostfile := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "towers-scripts")).Data["hostfile"]
			lines := strings.Split(strings.TrimSpace(hostfile), "\n")
			if len(lines) != l.towers {
				t.Fatalf("hostfile has %d lines, want %d:\n%s", len(lines), l.towers, hostfile)
			}
			ns := "kolotoc-" + l.stack
			for j, line := range lines {
				if w := fmt.Sprintf("tower-%d.tower.%s.svc slots=%d", j, ns, l.slots); line != w {
					t.Errorf("hostfile line %d = %q, want %q", j, line, w)
				}
			}

			job := rec.one(t, tJob, "towers-launcher")
			if !job.DeleteBeforeReplace {
				t.Error("launcher Job is not delete-before-replace: a new hostfile could not replace a Job of the same name")
			}
			launcher := decode[batchv1.Job](t, job)
			if got := launcher.Annotations["pulumi.com/skipAwait"]; got != "true" {
				t.Errorf("`pulumi up` would wait hours for the training run: skipAwait = %v", got)
			}
			env := envValues(launcher.Spec.Template.Spec.Containers[0])
			if np := env["KOLOTOC_NP"]; np != fmt.Sprint(l.towers*l.slots) {
				t.Errorf("launcher KOLOTOC_NP = %q, want towers × slots = %d (env %v)", np, l.towers*l.slots, env)
			}
		})
	}
}

func TestDevicePluginOnlyOnGPUNodes(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			rec := deploy(t, layoutRaw(t, i))
			if l.gpus == 0 {
				// No GPU pool: no device plugin, no GPU agents' namespace.
				if n := len(rec.ofType(tDaemonSet)); n != 0 {
					t.Errorf("%d DaemonSets on a stack without GPUs", n)
				}
				return
			}
			pod := templateOf(t, rec.one(t, tDaemonSet, "device-plugin")).Spec
			if len(pod.NodeSelector) == 0 {
				t.Fatal("device plugin has no node selector: it would run on CPU nodes")
			}
			for _, n := range gpuNodesSelected(t, rec, "device plugin", pod.NodeSelector) {
				want := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
				if len(n.Spec.Taints) == 0 || n.Spec.Taints[0] != want {
					t.Errorf("GPU node %s lacks taint nvidia.com/gpu=present:NoSchedule: %v", n.Name, n.Spec.Taints)
				}
			}
			if len(pod.Tolerations) == 0 || pod.Tolerations[0].Key != "nvidia.com/gpu" {
				t.Errorf("device plugin does not tolerate the GPU taint: %v", pod.Tolerations)
			}
		})
	}
}

// TestLabels: every Kubernetes object and pod template carries the app.kubernetes.io labels; the
// version is on objects only, never on a pod template.
func TestLabels(t *testing.T) {
	want := []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
		"app.kubernetes.io/part-of"}
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			rec := deploy(t, layoutRaw(t, i))
			checked := 0
			for _, r := range rec.sorted() {
				if !strings.HasPrefix(r.Type, "kubernetes:") {
					continue
				}
				in := inputs(r)
				paths := [][]string{{"metadata", "labels"}}
				if get(in, "spec", "template", "metadata") != nil {
					paths = append(paths, []string{"spec", "template", "metadata", "labels"})
				}
				for i, p := range paths {
					labels, _ := get(in, p...).(map[string]any)
					for _, k := range want {
						if labels[k] == nil || labels[k] == "" {
							t.Errorf("%s %s: %s lacks label %s", r.Type, r.Name, strings.Join(p, "."), k)
						}
					}
					if version, template := labels["app.kubernetes.io/version"], i > 0; !template && version != stacks.Version {
						t.Errorf("%s %s: version label %v, want %s", r.Type, r.Name, version, stacks.Version)
					} else if template && version != nil {
						// A label of the template is part of it: an upgrade would restart the pods.
						t.Errorf("%s %s: pod template labelled version %v: an upgrade of Kolotoc would restart its pods", r.Type, r.Name, version)
					}
					checked++
				}
			}
			if checked < 10 {
				t.Errorf("only %d label sets checked", checked)
			}
		})
	}
}

// TestSecretsOnlyAsSecrets: the Jupyter password, the ssh private key and the kubeconfig reach the
// registered inputs only inside secret values, and each of them does reach its resource.
func TestSecretsOnlyAsSecrets(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			rec := deploy(t, layoutRaw(t, i))
			for _, r := range rec.sorted() {
				if leak := findPlain(resource.NewProperty(r.Inputs), []string{testPassword, testSeed, "PRIVATE KEY", "kubeconfig-token"}); leak != "" {
					t.Errorf("%s %s: %q in plain text", r.Type, r.Name, leak)
				}
			}
			ssh := rec.one(t, tSecret, "towers-ssh")
			if v := ssh.Inputs["stringData"]; !isSecret(v) || !strings.Contains(secretText(v), "OPENSSH PRIVATE KEY") {
				t.Errorf("ssh key Secret: stringData secret=%v", isSecret(v))
			}
			jup := rec.one(t, tSecret, "entrypoint-jupyter")
			if v := jup.Inputs["stringData"]; !isSecret(v) || !strings.Contains(secretText(v), testPassword) {
				t.Errorf("jupyter token: secret=%v", isSecret(v))
			}
			if v := rec.one(t, tProvider, "k8s").Inputs["kubeconfig"]; !isSecret(v) {
				t.Error("provider kubeconfig is not a secret")
			}
		})
	}
}

// TestImagesPinned: no registered image is tagless or :latest.
func TestImagesPinned(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			rec := deploy(t, layoutRaw(t, i))
			n := 0
			for _, r := range rec.sorted() {
				walkImages(inputs(r), func(img string) {
					n++
					last := img[strings.LastIndex(img, "/")+1:]
					if !strings.Contains(last, ":") || strings.HasSuffix(img, ":latest") {
						t.Errorf("%s %s: image %q is not pinned", r.Type, r.Name, img)
					}
				})
			}
			if n < 5 {
				t.Errorf("only %d images found", n)
			}
		})
	}
}

// TestResourceCountIndependentOfRanks: 2 or 512 towers, 1 or 256 carriers, the same resources.
func TestResourceCountIndependentOfRanks(t *testing.T) {
	count := func(towers, carriers int) map[string]int {
		raw := stackRaw(t, "dev", map[string]string{
			"cloud":     "existing",
			"cluster":   fmt.Sprintf(`{"kubeconfig":%q}`, fakeKubeconfig(t)),
			"nodePools": `[{"name":"gpu","nodes":512,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100","cpus":96,"memory":"680Gi"},{"name":"cpu","nodes":256,"cpus":16,"memory":"64Gi"}]`,
			"towers":    fmt.Sprintf(`{"count":%d,"gpusPerTower":8}`, towers),
			"carriers":  fmt.Sprintf(`{"count":%d}`, carriers),
			"code":      `{"repository":"https://git.example.com/demo.git"}`, // dev's git:// is for the simulated cloud alone
			"storage":   `{"type":"nfs","server":"10.0.0.2"}`,                // dev's local store is one node's: no restarts over 512
		})
		m := map[string]int{}
		for _, r := range deploy(t, raw).sorted() {
			m[r.Type]++
		}
		return m
	}
	small, large := count(2, 1), count(512, 256)
	if d := cmp.Diff(small, large); d != "" {
		t.Errorf("resources by type differ between 2 and 512 towers (-2 +512):\n%s", d)
	}
	if small[tStatefulSet] != 2 {
		t.Errorf("want 2 StatefulSets (towers, carriers), got %d", small[tStatefulSet])
	}
}

// TestStorageProtection: with storage.protect the claim and volume carry Pulumi's protect option
// and the volume keeps its data (Retain); without it neither. (The in-cluster NFS server of the
// prod layout on the simulated cloud, in place of its Filestore.)
func TestStorageProtection(t *testing.T) {
	for _, protect := range []bool{true, false} {
		t.Run(fmt.Sprint(protect), func(t *testing.T) {
			raw := layoutRaw(t, 1)
			raw.Values["kolotoc:storage"] = fmt.Sprintf(`{"type":"filestore","tier":"ZONAL","size":"2Ti","protect":%v}`, protect)
			rec := deploy(t, raw)
			pv, pvc := rec.one(t, tPV, "storage"), rec.one(t, tPVC, "storage")
			if pv.Protect != protect || pvc.Protect != protect {
				t.Errorf("protect: volume %v claim %v, want %v", pv.Protect, pvc.Protect, protect)
			}
			want := map[bool]string{true: "Retain", false: "Delete"}[protect]
			spec := decode[corev1.PersistentVolume](t, pv).Spec
			if got := spec.PersistentVolumeReclaimPolicy; string(got) != want {
				t.Errorf("reclaim policy %v, want %s", got, want)
			}
			if spec.NFS == nil || spec.NFS.Server != fakeClusterIP {
				t.Errorf("in-cluster NFS volume points at %+v, want the server Service's ClusterIP", spec.NFS)
			}
		})
	}
}

// TestOutputs: every layout exports its endpoints and commands; the Jupyter password is among
// them only as a secret output (encrypted in state), which the printed command shows from the
// stack's state; no other output carries secret material.
func TestOutputs(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			_, outs := deployOutputs(t, layoutRaw(t, i))
			for _, k := range []string{"namespace", "jupyterUrl", "jupyterPortForward", "jupyterPassword", "jupyterPasswordCommand",
				"daskSchedulerAddress", "gotoTower", "gotoCarrier", "towerHostnamePattern", "towerCount", "towerHostfile", "launcherLogs"} {
				if _, ok := outs[k]; !ok {
					t.Errorf("output %s missing", k)
				}
			}
			for k, o := range outs {
				if k == stacks.JupyterPasswordOutput {
					if !o.secret || o.value != testPassword {
						t.Errorf("output %s: secret=%v, want the password as a secret", k, o.secret)
					}
					continue
				}
				if o.secret {
					t.Errorf("output %s is secret; only %s should be", k, stacks.JupyterPasswordOutput)
				}
				if text := fmt.Sprint(o.value); strings.Contains(text, testPassword) || strings.Contains(text, testSeed) {
					t.Errorf("output %s carries secret material in plain text", k)
				}
			}
			if got, want := outs["jupyterPasswordCommand"].value, "pulumi stack output --stack "+l.stack+" --show-secrets jupyterPassword"; got != want {
				t.Errorf("jupyterPasswordCommand = %v, want %s (it must not read the config file, which a stack may keep elsewhere)", got, want)
			}
			wantPath := map[string]string{"dev": "/tree", "prod-simulated": "/lab"}[l.name] // dev runs the classic Notebook
			if u, _ := outs["jupyterLocalUrl"].value.(string); !strings.HasSuffix(u, ":8888"+wantPath) {
				t.Errorf("jupyterLocalUrl = %v, want http://localhost:8888%s", u, wantPath)
			}
		})
	}
}

func isSecret(v resource.PropertyValue) bool {
	return v.IsSecret() || (v.IsOutput() && v.OutputValue().Secret)
}

func secretText(v resource.PropertyValue) string {
	switch {
	case v.IsSecret():
		v = v.SecretValue().Element
	case v.IsOutput():
		v = v.OutputValue().Element
	}
	b, _ := json.Marshal(v.Mappable())
	s := string(b)
	if v.IsString() {
		return v.StringValue()
	}
	return s
}

// findPlain returns the first needle found in a non-secret string anywhere in v.
func findPlain(v resource.PropertyValue, needles []string) string {
	switch {
	case isSecret(v):
		return ""
	case v.IsString():
		for _, n := range needles {
			if strings.Contains(v.StringValue(), n) {
				return n
			}
		}
	case v.IsOutput():
		return findPlain(v.OutputValue().Element, needles)
	case v.IsArray():
		for _, e := range v.ArrayValue() {
			if f := findPlain(e, needles); f != "" {
				return f
			}
		}
	case v.IsObject():
		for _, e := range v.ObjectValue() {
			if f := findPlain(e, needles); f != "" {
				return f
			}
		}
	}
	return ""
}

func walkImages(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "image" {
				f(s)
			}
			walkImages(e, f)
		}
	case []any:
		for _, e := range x {
			walkImages(e, f)
		}
	}
}
