package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/stacks"
)

const (
	tService  = "kubernetes:core/v1:Service"
	tPDB      = "kubernetes:policy/v1:PodDisruptionBudget"
	workloads = "workloads"
	// grafanaTestPassword is the Grafana admin password the workload tests set.
	grafanaTestPassword = "grafana-admin-password-for-tests"
)

// workloadsRaw is examples/workloads/Pulumi.workloads.yaml with its secrets set and the
// cluster's kubeconfig pointed at a throwaway file; overrides replace whole keys.
func workloadsRaw(t *testing.T, overrides map[string]string) stacks.Raw {
	t.Helper()
	raw, err := stacks.ReadStackFile(filepath.Join("..", "examples", workloads, "Pulumi."+workloads+".yaml"), "kolotoc", workloads, "")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"jupyterPassword": testPassword, "grafanaPassword": grafanaTestPassword} {
		raw.Values["kolotoc:"+k] = v
		raw.Secrets["kolotoc:"+k] = true
	}
	raw.Values["kolotoc:cluster"] = fmt.Sprintf(`{"kubeconfig":%q}`, fakeKubeconfig(t))
	for k, v := range overrides {
		raw.Values["kolotoc:"+k] = v
	}
	return raw
}

// TestGoldenWorkloads snapshots everything the workloads layout registers. Regenerate on purpose
// only: UPDATE_GOLDEN=1 go test ./tests -run TestGolden
func TestGoldenWorkloads(t *testing.T) {
	got := goldenYAML(t, deploy(t, workloadsRaw(t, nil)))
	compareGolden(t, filepath.Join("testdata", workloads+".golden.yaml"), got)
	for _, secret := range []string{testPassword, grafanaTestPassword, "kubeconfig-token-that-must-stay-secret"} {
		if bytes.Contains(got, []byte(secret)) {
			t.Errorf("golden output contains secret material %q", secret)
		}
	}
}

// headlessServices maps each headless Service's name to it.
func headlessServices(t *testing.T, rec *recorder) map[string]corev1.Service {
	t.Helper()
	out := map[string]corev1.Service{}
	for _, r := range rec.ofType(tService) {
		if svc := decode[corev1.Service](t, r); svc.Spec.ClusterIP == corev1.ClusterIPNone {
			out[svc.Name] = svc
		}
	}
	return out
}

// servicePorts lists a Service's ports.
func servicePorts(svc corev1.Service) []int {
	var out []int
	for _, p := range svc.Spec.Ports {
		out = append(out, int(p.Port))
	}
	return out
}

// selects reports whether a Service's selector matches a pod template's labels.
func selects(svc corev1.Service, tmpl corev1.PodTemplateSpec) bool {
	if len(svc.Spec.Selector) == 0 {
		return false
	}
	for k, v := range svc.Spec.Selector {
		if tmpl.Labels[k] != v {
			return false
		}
	}
	return true
}

// runEntry runs the TensorFlow entry script as a pod of the given hostname would, with
// `printenv TF_CONFIG` as the program.
func runEntry(t *testing.T, script, hostname string, env map[string]string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tf_config.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", path, "printenv", "TF_CONFIG")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOSTNAME=" + hostname}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

type tfConfig struct {
	Cluster map[string][]string `json:"cluster"`
	Task    struct {
		Type  string `json:"type"`
		Index *int   `json:"index"`
	} `json:"task"`
}

// TestTFConfig runs every TensorFlow pod's entry script as that pod and checks the TF_CONFIG it
// produces: it parses, names the pod's own task type and index, every pod sees the same cluster,
// every chief/worker/ps task appears exactly once with contiguous indexes, and every address is
// a pod of a StatefulSet under the headless Service it names, on a port that Service serves.
func TestTFConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tf     string // kolotoc:tfcluster override; "" = the example's
		counts map[string]int
	}{
		{name: "example", counts: map[string]int{"chief": 1, "worker": 2, "ps": 2, "evaluator": 1}},
		{name: "no chief, no evaluator, own program", tf: `{"enabled":true,"command":["python","/shared/train.py"],"chief":{"count":0},"evaluator":{"count":0},"workers":{"count":3,"gpus":2},"ps":{"count":3}}`,
			counts: map[string]int{"worker": 3, "ps": 3}},
		{name: "workers only", tf: `{"enabled":true,"command":["python","/shared/mwms.py"],"chief":{"count":0},"evaluator":{"count":0},"ps":{"count":0},"workers":{"count":4,"gpus":4}}`,
			counts: map[string]int{"worker": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ov := map[string]string{}
			if tc.tf != "" {
				ov["tfcluster"] = tc.tf
			}
			rec := deploy(t, workloadsRaw(t, ov))
			script := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "tfcluster-scripts")).Data["tf_config.sh"]
			if script == "" {
				t.Fatal("no entry script in the tf-scripts ConfigMap")
			}
			services := headlessServices(t, rec)
			port := 2222

			var cluster map[string][]string
			seenTypes := map[string]int{}
			for _, r := range rec.ofType(tStatefulSet) {
				sts := decode[appsv1.StatefulSet](t, r)
				name := sts.Name
				if !strings.HasPrefix(name, "tf-") {
					continue
				}
				replicas := int(*sts.Spec.Replicas)
				tmpl := sts.Spec.Template
				c := tmpl.Spec.Containers[0]
				env := envValues(c)
				if got := c.Command; len(got) != 2 || got[1] != "/etc/kolotoc/tf/tf_config.sh" {
					t.Errorf("%s: command %v does not run the entry script", name, got)
				}
				svcName := sts.Spec.ServiceName
				if svc, ok := services[svcName]; !ok || !selects(svc, tmpl) {
					t.Errorf("%s: serviceName %q is not a headless Service selecting its pods", name, svcName)
				}
				typ := env["KOLOTOC_TF_TASK_TYPE"]
				seenTypes[typ] = replicas
				for i := 0; i < replicas; i++ {
					host := fmt.Sprintf("%s-%d", name, i)
					out, err := runEntry(t, script, host, env)
					if err != nil {
						t.Fatalf("%s: entry script: %v", host, err)
					}
					var cfg tfConfig
					if err := json.Unmarshal([]byte(out), &cfg); err != nil {
						t.Fatalf("%s: TF_CONFIG does not parse: %v\n%s", host, err, out)
					}
					if cfg.Task.Type != typ || cfg.Task.Index == nil || *cfg.Task.Index != i {
						t.Errorf("%s: TF_CONFIG task is %s, want type %s index %d", host, out, typ, i)
					}
					if cluster == nil {
						cluster = cfg.Cluster
					} else if d := cmp.Diff(cluster, cfg.Cluster); d != "" {
						t.Errorf("%s sees another cluster (-first +this):\n%s", host, d)
					}
				}
			}
			if d := cmp.Diff(tc.counts, seenTypes); d != "" {
				t.Errorf("task types and counts (-want +got):\n%s", d)
			}
			if _, ok := cluster["evaluator"]; ok {
				t.Error("the evaluator is in the cluster spec; TensorFlow keeps it out")
			}
			seen := map[string]bool{}
			addr := regexp.MustCompile(`^(tf-[a-z]+)-([0-9]+)\.(tf-[a-z]+)\.kolotoc-workloads\.svc:([0-9]+)$`)
			for typ, tasks := range cluster {
				if tasks == nil || len(tasks) != seenTypes[typ] {
					t.Errorf("cluster[%s] has %d tasks, the StatefulSet %d pods", typ, len(tasks), seenTypes[typ])
				}
				for i, a := range tasks {
					if seen[a] {
						t.Errorf("%s appears twice in the cluster", a)
					}
					seen[a] = true
					m := addr.FindStringSubmatch(a)
					if m == nil {
						t.Errorf("cluster[%s][%d] = %q is not <pod>.<service>.<namespace>.svc:<port>", typ, i, a)
						continue
					}
					if idx, _ := strconv.Atoi(m[2]); idx != i {
						t.Errorf("cluster[%s][%d] = %q: index out of order (indexes must be contiguous from 0)", typ, i, a)
					}
					svc, ok := services[m[3]]
					if !ok {
						t.Errorf("%s: no headless Service %s", a, m[3])
						continue
					}
					if p, _ := strconv.Atoi(m[4]); p != port || !contains(servicePorts(svc), p) {
						t.Errorf("%s: port %s not served by Service %s (%v)", a, m[4], m[3], servicePorts(svc))
					}
					sts := named[appsv1.StatefulSet](t, rec, tStatefulSet, m[1])
					if sts.Spec.ServiceName != m[3] {
						t.Errorf("%s: pod of StatefulSet %s, which is not under Service %s", a, m[1], m[3])
					}
				}
			}
		})
	}
}

func contains(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// TestTFConfigRefusesHostnameWithoutOrdinal: a pod that is not a StatefulSet pod fails loudly
// instead of running with a wrong index.
func TestTFConfigRefusesHostnameWithoutOrdinal(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	script := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "tfcluster-scripts")).Data["tf_config.sh"]
	if _, err := runEntry(t, script, "tf-worker", map[string]string{"KOLOTOC_TF_CLUSTER": "{}", "KOLOTOC_TF_TASK_TYPE": "worker"}); err == nil {
		t.Error("entry script accepted hostname tf-worker (no ordinal)")
	}
}

// TestTFTensorBoard: the entrypoint's TensorBoard reads the shared log directory the tasks write
// under; without it the cluster brings its own over the same directory.
func TestTFTensorBoard(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	w := named[appsv1.StatefulSet](t, rec, tStatefulSet, "tf-worker").Spec.Template.Spec.Containers[0]
	logDir := envValues(w)["KOLOTOC_LOG_DIR"]
	tbArgs := containerNamed(t, templateOf(t, rec.one(t, tDeployment, "entrypoint")).Spec, "tensorboard").Command
	if !hasLogdirAbove(tbArgs, logDir) {
		t.Errorf("entrypoint TensorBoard %v does not read the tasks' log dir %s", tbArgs, logDir)
	}
	for _, r := range rec.ofType(tDeployment) {
		if nameOf(t, r) == "tf-tensorboard" {
			t.Error("a second TensorBoard although the entrypoint runs one")
		}
	}

	rec = deploy(t, workloadsRaw(t, map[string]string{"entrypoint": `{"tensorboard":false}`}))
	tb := named[appsv1.Deployment](t, rec, tDeployment, "tf-tensorboard")
	if !hasLogdirAbove(tb.Spec.Template.Spec.Containers[0].Command, logDir) {
		t.Errorf("own TensorBoard does not read %s", logDir)
	}
	named[corev1.Service](t, rec, tService, "tf-tensorboard")

	// tfcluster.tensorboard: false runs none (the local real node has no TensorBoard image): no
	// Deployment, Service, allow or output, and its image is not asked for.
	raw := workloadsRaw(t, map[string]string{
		"entrypoint": `{"tensorboard":false}`,
		"tfcluster":  `{"enabled":true,"ps":{"count":2},"workers":{"count":2,"gpus":4},"tensorboard":false,"tensorboardImage":"unpinned"}`,
	})
	rec = deploy(t, raw)
	for _, token := range []string{tDeployment, tService, tNetworkPolicy} {
		for _, r := range rec.ofType(token) {
			if nameOf(t, r) == "tf-tensorboard" {
				t.Errorf("tfcluster.tensorboard false still registers %s tf-tensorboard", token)
			}
		}
	}
	// Every output of the stack (the workloads' among them).
	_, outs := deployOutputs(t, raw)
	for k := range outs {
		if strings.HasPrefix(k, "tfTensorboard") {
			t.Errorf("tfcluster.tensorboard false still outputs %s", k)
		}
	}
}

func hasLogdirAbove(args []string, dir string) bool {
	for _, a := range args {
		if d, ok := strings.CutPrefix(a, "--logdir="); ok && (dir == d || strings.HasPrefix(dir, d+"/")) {
			return true
		}
	}
	return false
}

// torchrunFlags expands the worker's $(VAR) references as the kubelet does, with configMapKeyRef
// values read from the registered ConfigMaps, and returns torchrun's --flag=value options and the
// rest (script and its arguments).
func torchrunFlags(t *testing.T, rec *recorder, container corev1.Container) (map[string]string, []string) {
	t.Helper()
	env := map[string]string{}
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			env[e.Name] = named[corev1.ConfigMap](t, rec, tConfigMap, ref.Name).Data[ref.Key]
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	flags := map[string]string{}
	var rest []string
	for _, a := range container.Args {
		a = ref.ReplaceAllStringFunc(a, func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			if !ok {
				t.Errorf("argument %q references undefined %s", a, m)
			}
			return v
		})
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") && len(rest) == 0 {
			flags[k] = v
		} else {
			rest = append(rest, a)
		}
	}
	return flags, rest
}

// TestElasticTorchrun: torchrun's arguments follow the config for both rendezvous backends, the
// endpoint is a Service that exists, and the etcd backends run against etcd 3.5 with v2 on.
func TestElasticTorchrun(t *testing.T) {
	for _, tc := range []struct {
		name, elastic, etcd string
		wantEndpoint        string
		wantFlags           map[string]string
		cpu                 bool // CPU workers: no GPU, one process each
	}{
		{name: "etcd-v2 (example)", wantEndpoint: "etcd.kolotoc-workloads.svc:2379",
			wantFlags: map[string]string{"--nnodes": "1:2", "--nproc_per_node": "8", "--rdzv_backend": "etcd-v2", "--rdzv_id": "kolotoc-workloads", "--max_restarts": "3"}},
		{name: "c10d", etcd: `{"enabled":false}`,
			elastic:      `{"enabled":true,"minNodes":2,"maxNodes":3,"nodes":2,"gpusPerNode":4,"rdzvId":"bert-large","maxRestarts":0}`,
			wantEndpoint: "elastic-0.elastic.kolotoc-workloads.svc:29400",
			wantFlags:    map[string]string{"--nnodes": "2:3", "--nproc_per_node": "4", "--rdzv_backend": "c10d", "--rdzv_id": "bert-large", "--max_restarts": "0"}},
		{name: "etcd, own script", elastic: `{"enabled":true,"maxNodes":2,"rdzvBackend":"etcd","command":["/shared/train.py","--epochs","3"]}`,
			wantEndpoint: "etcd.kolotoc-workloads.svc:2379",
			wantFlags:    map[string]string{"--nnodes": "1:2", "--nproc_per_node": "8", "--rdzv_backend": "etcd", "--rdzv_id": "kolotoc-workloads", "--max_restarts": "3"}},
		{name: "c10d on a CPU pool", etcd: `{"enabled":false}`, cpu: true,
			elastic:      `{"enabled":true,"pool":"cpu","minNodes":1,"maxNodes":2,"cpu":"4","memory":"8Gi"}`,
			wantEndpoint: "elastic-0.elastic.kolotoc-workloads.svc:29400",
			wantFlags:    map[string]string{"--nnodes": "1:2", "--nproc_per_node": "1", "--rdzv_backend": "c10d", "--rdzv_id": "kolotoc-workloads", "--max_restarts": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ov := map[string]string{}
			if tc.elastic != "" {
				ov["elastic"] = tc.elastic
			}
			if tc.etcd != "" {
				ov["etcd"] = tc.etcd
			}
			raw := workloadsRaw(t, ov)
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			rec := deploy(t, raw)
			sts := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, "elastic"))
			pod := sts.Spec.Template.Spec
			c := pod.Containers[0]
			flags, rest := torchrunFlags(t, rec, c)
			want := map[string]string{"--rdzv_endpoint": tc.wantEndpoint}
			for k, v := range tc.wantFlags {
				want[k] = v
			}
			if d := cmp.Diff(want, flags); d != "" {
				t.Errorf("torchrun options (-want +got):\n%s", d)
			}
			wantRest := cfg.Elastic.Command
			if len(wantRest) == 0 {
				wantRest = []string{"/etc/kolotoc/elastic/check.py"}
			}
			if d := cmp.Diff(wantRest, rest); d != "" {
				t.Errorf("training command (-want +got):\n%s", d)
			}
			if got := int(*sts.Spec.Replicas); got != cfg.Elastic.Nodes {
				t.Errorf("replicas %d, want elastic.nodes %d", got, cfg.Elastic.Nodes)
			}
			gpus := tc.wantFlags["--nproc_per_node"]
			req, lim := c.Resources.Requests, c.Resources.Limits
			_, reqGPU := req["nvidia.com/gpu"]
			_, limGPU := lim["nvidia.com/gpu"]
			switch {
			case tc.cpu:
				if reqGPU || limGPU || len(pod.Tolerations) != 0 || pod.NodeSelector["kolotoc.dev/pool"] != "cpu" {
					t.Errorf("CPU workers: resources %v tolerations %v nodeSelector %v; want no GPU, no toleration, the cpu pool",
						c.Resources, pod.Tolerations, pod.NodeSelector)
				}
			case !reqGPU || !limGPU || req.Name("nvidia.com/gpu", "").String() != gpus || lim.Name("nvidia.com/gpu", "").String() != gpus:
				t.Errorf("GPU requests/limits %v, want %s", c.Resources, gpus)
			case len(pod.Tolerations) == 0 || pod.Tolerations[0].Key != "nvidia.com/gpu" || pod.NodeSelector["kolotoc.dev/pool"] != "gpu":
				t.Errorf("workers do not tolerate the GPU taint or select the gpu pool: %v %v", pod.Tolerations, pod.NodeSelector)
			}
			if !mountsClaim(pod, c, "shared", "/shared") {
				t.Error("workers do not mount the shared claim at /shared")
			}

			host, portStr, _ := strings.Cut(tc.wantEndpoint, ":")
			port, _ := strconv.Atoi(portStr)
			svcName := strings.Split(host, ".")[0]
			if strings.HasPrefix(host, "elastic-0.") {
				svcName = "elastic"
				if sts.Spec.ServiceName != "elastic" || !headlessServices(t, rec)["elastic"].Spec.PublishNotReadyAddresses {
					t.Error("c10d endpoint: worker 0 is not named by a headless Service publishing not-ready addresses")
				}
			}
			svc := decode[corev1.Service](t, rec.one(t, tService, svcName))
			if !contains(servicePorts(svc), port) {
				t.Errorf("endpoint %s: Service %s serves %v", tc.wantEndpoint, svcName, servicePorts(svc))
			}

			etcds := 0
			for _, r := range rec.ofType(tStatefulSet) {
				if r.Name == "etcd" {
					etcds++
				}
			}
			if backend := tc.wantFlags["--rdzv_backend"]; backend != "c10d" {
				if etcds != 1 {
					t.Fatalf("backend %s without an etcd StatefulSet", backend)
				}
				checkEtcdV2(t, rec)
			}
		})
	}
}

// checkEtcdV2: the etcd members run etcd 3.5.x with the v2 API enabled.
func checkEtcdV2(t *testing.T, rec *recorder) {
	t.Helper()
	c := templateOf(t, rec.one(t, tStatefulSet, "etcd")).Spec.Containers[0]
	img := c.Image
	tag := img[strings.LastIndex(img, ":")+1:]
	if !regexp.MustCompile(`^v?3\.5\.[0-9]+`).MatchString(tag) {
		t.Errorf("etcd image %s is not 3.5.x (3.6 has no v2 API)", img)
	}
	if cmd := c.Command; !containsStr(cmd, "--enable-v2=true") {
		t.Errorf("etcd runs without --enable-v2=true: %v", cmd)
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mountsClaim(pod corev1.PodSpec, container corev1.Container, volume, path string) bool {
	claimed := false
	for _, v := range pod.Volumes {
		if v.Name == volume && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "shared" {
			claimed = true
		}
	}
	for _, m := range container.VolumeMounts {
		if claimed && m.Name == volume && m.MountPath == path {
			return true
		}
	}
	return false
}

// TestElasticScalingKeepsWorkers: changing nodes, maxNodes or minNodes changes the StatefulSet's
// replicas and the scale ConfigMap, never the pod template, so running workers are not rolled.
func TestElasticScalingKeepsWorkers(t *testing.T) {
	render := func(elastic string) (tmpl corev1.PodTemplateSpec, replicas int32, nnodes string) {
		rec := deploy(t, workloadsRaw(t, map[string]string{"elastic": elastic}))
		sts := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, "elastic"))
		return sts.Spec.Template, *sts.Spec.Replicas,
			decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "elastic-scale")).Data["nnodes"]
	}
	base := `{"enabled":true,"rdzvBackend":"etcd-v2","minNodes":1,"maxNodes":2}`
	t0, r0, n0 := render(base)
	for name, changed := range map[string]string{
		"max 2→3":   `{"enabled":true,"rdzvBackend":"etcd-v2","minNodes":1,"maxNodes":3}`,
		"min 1→2":   `{"enabled":true,"rdzvBackend":"etcd-v2","minNodes":2,"maxNodes":2}`,
		"nodes 2→1": `{"enabled":true,"rdzvBackend":"etcd-v2","minNodes":1,"maxNodes":2,"nodes":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			t1, r1, n1 := render(changed)
			if d := cmp.Diff(t0, t1); d != "" {
				t.Errorf("the pod template changed, which would restart every worker:\n%s", d)
			}
			if cmp.Equal(r0, r1) && cmp.Equal(n0, n1) {
				t.Errorf("neither replicas (%v) nor --nnodes (%v) changed", r1, n1)
			}
		})
	}
}

// TestEtcd: members, Services, volumes, disruption budget and readiness.
func TestEtcd(t *testing.T) {
	for _, members := range []int{1, 3} {
		t.Run(fmt.Sprint(members), func(t *testing.T) {
			rec := deploy(t, workloadsRaw(t, map[string]string{"etcd": fmt.Sprintf(`{"enabled":true,"members":%d}`, members)}))
			sts := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, "etcd"))
			if got := int(*sts.Spec.Replicas); got != members {
				t.Errorf("replicas %d, want %d", got, members)
			}
			checkEtcdV2(t, rec)
			c := sts.Spec.Template.Spec.Containers[0]
			cmd := c.Command
			var initial string
			for _, a := range cmd {
				if v, ok := strings.CutPrefix(a, "--initial-cluster="); ok {
					initial = v
				}
			}
			if n := len(strings.Split(initial, ",")); n != members {
				t.Errorf("--initial-cluster names %d members, want %d: %s", n, members, initial)
			}
			if pr := c.ReadinessProbe; pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/health" {
				t.Errorf("no /health readiness probe: %+v", pr)
			}
			if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
				t.Errorf("resources %v", c.Resources)
			} else if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("resources %v", c.Resources)
			}
			peer, ok := headlessServices(t, rec)["etcd-peer"]
			if !ok || !peer.Spec.PublishNotReadyAddresses || sts.Spec.ServiceName != "etcd-peer" {
				t.Error("members are not named by a headless peer Service that publishes not-ready addresses")
			}
			if client := decode[corev1.Service](t, rec.one(t, tService, "etcd")); !contains(servicePorts(client), 2379) {
				t.Error("client Service does not serve 2379")
			}
			// Simulated cloud: one static volume per member, pre-bound to the claim the
			// StatefulSet controller will make (<template>-<statefulset>-<i>).
			if len(sts.Spec.VolumeClaimTemplates) == 0 {
				t.Fatal("no volume claim template")
			}
			vct := sts.Spec.VolumeClaimTemplates[0].Name
			pvs := 0
			for _, r := range rec.ofType(tPV) {
				pv := decode[corev1.PersistentVolume](t, r)
				if pv.Spec.ClaimRef == nil || !strings.HasPrefix(pv.Spec.ClaimRef.Name, vct+"-etcd-") {
					continue
				}
				pvs++
				if pv.Spec.StorageClassName != "" {
					t.Errorf("%s: static volume with a storage class", r.Name)
				}
			}
			if pvs != members {
				t.Errorf("%d static volumes, want %d", pvs, members)
			}
			var pdbs []registered // etcd's own; the elastic workers and TF tasks have theirs
			for _, r := range rec.ofType(tPDB) {
				if r.Name == "etcd" {
					pdbs = append(pdbs, r)
				}
			}
			if members == 3 {
				if len(pdbs) != 1 || decode[policyv1.PodDisruptionBudget](t, pdbs[0]).Spec.MaxUnavailable.IntValue() != 1 {
					t.Errorf("3 members need a PodDisruptionBudget with maxUnavailable 1: %v", pdbs)
				}
			} else if len(pdbs) != 0 {
				t.Error("a PodDisruptionBudget for a single member would block every drain")
			}
		})
	}
}

// TestDCGMExporterOnlyOnGPUNodes: the exporter's node selector picks exactly the GPU nodes, and it
// tolerates their taint; Prometheus scrapes it.
func TestDCGMExporterOnlyOnGPUNodes(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	pod := templateOf(t, rec.one(t, tDaemonSet, "monitoring-dcgm-exporter")).Spec
	sel := pod.NodeSelector
	if len(sel) == 0 {
		t.Fatal("the DCGM exporter has no node selector: it would run on CPU nodes")
	}
	gpuNodesSelected(t, rec, "DCGM exporter", sel)
	if len(pod.Tolerations) == 0 || pod.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Errorf("the exporter does not tolerate the GPU taint: %v", pod.Tolerations)
	}
	if _, ok := pod.Containers[0].Resources.Requests["nvidia.com/gpu"]; ok {
		t.Error("the exporter requests a GPU, taking it from training")
	}

	// With no GPU pool, no exporter.
	rec = deploy(t, workloadsRaw(t, map[string]string{
		"nodePools": `[{"name":"cpu","nodes":2,"cpus":16,"memory":"64Gi"}]`,
		"elastic":   `{"enabled":false}`, "tfcluster": `{"enabled":false}`,
	}))
	if len(rec.ofType(tDaemonSet)) != 0 {
		t.Error("DaemonSets on a cluster without GPUs")
	}
}

// TestMonitoringConfig: prometheus.yml parses and has the scrape jobs; Grafana's data source is
// the stack's Prometheus; the GPU dashboard shows power, temperature, utilisation and memory per
// GPU and per node, against that data source.
func TestMonitoringConfig(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	promYAML := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "monitoring-prometheus")).Data["prometheus.yml"]
	var prom struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(promYAML), &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	var jobs []string
	for _, s := range prom.ScrapeConfigs {
		jobs = append(jobs, s.JobName)
	}
	if d := cmp.Diff([]string{"prometheus", "dcgm-exporter", "dask", "kube-state-metrics"}, jobs); d != "" {
		t.Errorf("scrape jobs (-want +got):\n%s", d)
	}
	// The dask job keeps the port names the Dask containers declare.
	for _, want := range []string{"dashboard", "dask-dash"} {
		if !strings.Contains(fmt.Sprint(inputs(rec.one(t, tDeployment, "entrypoint")), inputs(rec.one(t, tStatefulSet, "carriers"))), "name:"+want) {
			t.Errorf("no Dask container port named %s to scrape", want)
		}
	}

	// Grafana's provisioning files, decoded strictly against its documented v1 schema (Grafana
	// is not packaged by Debian, so no Grafana reads them in the local test bed): a misspelt or
	// misplaced key fails here rather than being ignored by Grafana at start.
	prov := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "monitoring-grafana-provisioning")).Data
	strict := func(key string, v any) {
		t.Helper()
		dec := yaml.NewDecoder(strings.NewReader(prov[key]))
		dec.KnownFields(true)
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, Type, Access, UID, URL, User, Database, BasicAuthUser string
			OrgID                                                       int `yaml:"orgId"`
			Version                                                     int
			BasicAuth                                                   bool `yaml:"basicAuth"`
			WithCredentials                                             bool `yaml:"withCredentials"`
			IsDefault                                                   bool `yaml:"isDefault"`
			Editable                                                    bool
			JSONData                                                    map[string]any `yaml:"jsonData"`
			SecureJSONData                                              map[string]any `yaml:"secureJsonData"`
		} `yaml:"datasources"`
	}
	strict("datasources.yaml", &ds)
	var providers struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Folder, Type    string
			OrgID                 int    `yaml:"orgId"`
			FolderUID             string `yaml:"folderUid"`
			DisableDeletion       bool   `yaml:"disableDeletion"`
			UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
			AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
			Options               struct {
				Path                      string
				FoldersFromFilesStructure bool `yaml:"foldersFromFilesStructure"`
			}
		} `yaml:"providers"`
	}
	strict("dashboards.yaml", &providers)
	if ds.APIVersion != 1 || providers.APIVersion != 1 {
		t.Errorf("provisioning apiVersion %d and %d, want 1", ds.APIVersion, providers.APIVersion)
	}
	for _, d := range ds.Datasources {
		if d.Name == "" || d.Access != "proxy" {
			t.Errorf("data source %+v: want a name and access proxy (Grafana's server queries Prometheus)", d)
		}
	}
	grafana := fmt.Sprint(inputs(rec.one(t, tDeployment, "monitoring-grafana")))
	for _, p := range providers.Providers {
		if p.Name == "" || p.Type != "file" || p.Options.Path == "" || !strings.Contains(grafana, "mountPath:"+p.Options.Path) {
			t.Errorf("dashboard provider %+v: want a file provider reading a path the Grafana pod mounts", p)
		}
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus.kolotoc-workloads.svc:9090" {
		t.Fatalf("data sources %+v", ds.Datasources)
	}
	if svc := decode[corev1.Service](t, rec.one(t, tService, "monitoring-prometheus")); svc.Name != "prometheus" || !contains(servicePorts(svc), 9090) {
		t.Error("the data source URL is not the Prometheus Service")
	}

	dashText := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "monitoring-grafana-dashboards")).Data["gpus.json"]
	var dash struct {
		Panels []struct {
			Title      string
			Datasource struct{ UID string }
			Targets    []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(dashText), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	exprs := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Datasource.UID != ds.Datasources[0].UID {
			t.Errorf("panel %q uses data source %q", p.Title, p.Datasource.UID)
		}
		for _, tg := range p.Targets {
			exprs[tg.Expr] = true
		}
	}
	for _, metric := range []string{"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"} {
		perNode := false
		for e := range exprs {
			if strings.Contains(e, "by (node)") && strings.Contains(e, metric) {
				perNode = true
			}
		}
		if !exprs[metric] || !perNode {
			t.Errorf("%s: per GPU %v, per node %v", metric, exprs[metric], perNode)
		}
	}
}

// TestGrafanaPasswordIsSecret: the password reaches its Secret as a secret value, appears nowhere
// in plain text, reaches Grafana only by reference, and only a secret output carries it.
func TestGrafanaPasswordIsSecret(t *testing.T) {
	raw := workloadsRaw(t, nil)
	rec := deploy(t, raw)
	for _, r := range rec.sorted() {
		if leak := findPlain(resource.NewProperty(r.Inputs), []string{grafanaTestPassword, testPassword, "kubeconfig-token"}); leak != "" {
			t.Errorf("%s %s: %q in plain text", r.Type, r.Name, leak)
		}
	}
	s := rec.one(t, tSecret, "monitoring-grafana")
	if v := s.Inputs["stringData"]; !isSecret(v) || !strings.Contains(secretText(v), grafanaTestPassword) {
		t.Errorf("Grafana Secret: stringData secret=%v", isSecret(v))
	}
	g := templateOf(t, rec.one(t, tDeployment, "monitoring-grafana")).Spec.Containers[0]
	ref := envVars(g)["GF_SECURITY_ADMIN_PASSWORD"].ValueFrom
	if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != nameOf(t, s) {
		t.Errorf("Grafana reads its password from %+v, not the Secret", ref)
	}
	cfg, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Only the secret output grafanaPassword carries it (encrypted in state); the printed
	// command shows it from the stack's state, not from the config file.
	outs := resolveOutputs(t, raw, stacks.WorkloadOutputs(cfg, localAccess(t, cfg)))
	for k, o := range outs {
		if k == stacks.GrafanaPasswordOutput {
			if !o.secret || o.value != grafanaTestPassword {
				t.Errorf("output %s: secret=%v, want the password as a secret", k, o.secret)
			}
		} else if o.secret || strings.Contains(fmt.Sprint(o.value), grafanaTestPassword) {
			t.Errorf("output %s: secret=%v; it must neither be secret nor carry the Grafana password", k, o.secret)
		}
	}
	if got, want := outs["grafanaPasswordCommand"].value, "pulumi stack output --stack workloads --show-secrets grafanaPassword"; got != want {
		t.Errorf("grafanaPasswordCommand = %v, want %s", got, want)
	}
	for _, k := range []string{"grafanaUrl", "grafanaPortForward", "prometheusUrl", "grafanaPassword", "grafanaPasswordCommand", "etcdEndpoint",
		"elasticRendezvousEndpoint", "elasticNnodes", "tfClusterSpec", "gotoElastic"} {
		if _, ok := outs[k]; !ok {
			t.Errorf("output %s missing", k)
		}
	}
}

// TestMonitoringWithoutGrafana: monitoring.grafana false (the local test bed: Debian has no
// Grafana) keeps Prometheus, its discovery and its scrape allow, registers nothing of Grafana,
// needs no password, admits no one to Grafana's port and prints no Grafana output.
func TestMonitoringWithoutGrafana(t *testing.T) {
	raw := workloadsRaw(t, map[string]string{"monitoring": `{"enabled":true,"grafana":false}`})
	delete(raw.Values, "kolotoc:grafanaPassword")
	delete(raw.Secrets, "kolotoc:grafanaPassword")
	rec := deploy(t, raw)
	for _, r := range rec.sorted() {
		if strings.Contains(r.Name, "grafana") {
			t.Errorf("%s %s registered with monitoring.grafana false", r.Type, r.Name)
		}
	}
	rec.one(t, tDeployment, "monitoring-prometheus")
	rec.one(t, tConfigMap, "monitoring-prometheus")
	ui := decode[networkingv1.NetworkPolicy](t, rec.one(t, tNetworkPolicy, "network-policies-monitoring-ui"))
	var uiPorts []string
	for _, rule := range ui.Spec.Ingress {
		for _, p := range rule.Ports {
			uiPorts = append(uiPorts, p.Port.String())
		}
	}
	if got := fmt.Sprint(uiPorts); got != "[9090]" {
		t.Errorf("monitoring-ui admits ports %s; want Prometheus's port 9090 alone", got)
	}
	cfg, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	outs := resolveOutputs(t, raw, stacks.WorkloadOutputs(cfg, localAccess(t, cfg)))
	for k := range outs {
		if strings.HasPrefix(k, "grafana") {
			t.Errorf("output %s with monitoring.grafana false", k)
		}
	}
	if _, ok := outs["prometheusPortForward"]; !ok {
		t.Error("no prometheusPortForward output")
	}

	// With Grafana on (the default), its password stays required.
	raw = workloadsRaw(t, map[string]string{"monitoring": `{"enabled":true}`})
	delete(raw.Values, "kolotoc:grafanaPassword")
	if _, err := stacks.Load(raw); err == nil || !strings.Contains(err.Error(), "grafanaPassword") {
		t.Errorf("monitoring with Grafana and no password: %v, want an error naming kolotoc:grafanaPassword", err)
	}
}

// TestWorkloadsProperties: the properties every layout keeps, on this one: labels (the version on
// objects, not on pod templates), pinned images.
func TestWorkloadsProperties(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	want := []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
		"app.kubernetes.io/part-of", "app.kubernetes.io/version"}
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
				if i > 0 && k == "app.kubernetes.io/version" {
					continue // pod templates carry no version (TestLeastPrivilege)
				}
				if labels[k] == nil || labels[k] == "" {
					t.Errorf("%s %s: %s lacks label %s", r.Type, r.Name, strings.Join(p, "."), k)
				}
			}
		}
		walkImages(in, func(img string) {
			last := img[strings.LastIndex(img, "/")+1:]
			if !strings.Contains(last, ":") || strings.HasSuffix(img, ":latest") {
				t.Errorf("%s %s: image %q is not pinned", r.Type, r.Name, img)
			}
		})
	}
}

// TestEveryWorkloadPodFits schedules every pod the layout creates (replicas of Deployments and
// StatefulSets, DaemonSet pods on the nodes they select) onto the simulated nodes, honouring node
// selectors, the GPU taint and CPU, memory and GPU requests, largest first: the layout promises
// that nothing stays Pending. The end-to-end suite checks the same on the real scheduler.
func TestEveryWorkloadPodFits(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	type node struct {
		name    string
		labels  map[string]string
		tainted bool
		free    map[string]int64 // milli-CPU, bytes, GPUs
	}
	var nodes []*node
	for _, n := range rec.simulatedNodes() {
		kn := decode[corev1.Node](t, n)
		var capacity map[string]string
		if err := json.Unmarshal([]byte(kn.Annotations["kolotoc.dev/simulated-capacity"]), &capacity); err != nil {
			t.Fatal(err)
		}
		nd := &node{name: n.Name, labels: kn.Labels, free: map[string]int64{}}
		nd.tainted = len(kn.Spec.Taints) > 0
		for k, v := range capacity {
			q := k8sresource.MustParse(v)
			if k == "cpu" {
				nd.free[k] = q.MilliValue()
			} else {
				nd.free[k] = q.Value()
			}
		}
		nodes = append(nodes, nd)
	}
	type pod struct {
		name      string
		selector  map[string]string
		tolerates bool
		requests  map[string]int64
		pinned    *node // DaemonSet pods
	}
	var pods []pod
	podOf := func(name string, spec corev1.PodSpec) pod {
		p := pod{name: name, requests: map[string]int64{}, selector: spec.NodeSelector}
		p.tolerates = len(spec.Tolerations) > 0 && spec.Tolerations[0].Key == "nvidia.com/gpu"
		for _, c := range spec.Containers {
			for k, q := range c.Resources.Requests {
				if k == corev1.ResourceCPU {
					p.requests[string(k)] += q.MilliValue()
				} else {
					p.requests[string(k)] += q.Value()
				}
			}
		}
		return p
	}
	matches := func(sel map[string]string, n *node) bool {
		for k, v := range sel {
			if n.labels[k] != v {
				return false
			}
		}
		return true
	}
	for _, typ := range []string{tDeployment, tStatefulSet, tDaemonSet} {
		for _, r := range rec.ofType(typ) {
			spec := templateOf(t, r).Spec
			if typ == tDaemonSet {
				for _, n := range nodes {
					if p := podOf(r.Name, spec); matches(p.selector, n) {
						p.pinned = n
						pods = append(pods, p)
					}
				}
				continue
			}
			var n *int32
			if typ == tDeployment {
				n = decode[appsv1.Deployment](t, r).Spec.Replicas
			} else {
				n = decode[appsv1.StatefulSet](t, r).Spec.Replicas
			}
			replicas := 1
			if n != nil {
				replicas = int(*n)
			}
			for i := 0; i < replicas; i++ {
				pods = append(pods, podOf(fmt.Sprintf("%s-%d", r.Name, i), spec))
			}
		}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		if (pods[i].pinned != nil) != (pods[j].pinned != nil) {
			return pods[i].pinned != nil
		}
		if pods[i].requests["nvidia.com/gpu"] != pods[j].requests["nvidia.com/gpu"] {
			return pods[i].requests["nvidia.com/gpu"] > pods[j].requests["nvidia.com/gpu"]
		}
		return pods[i].requests["cpu"] > pods[j].requests["cpu"]
	})
	fits := func(p pod, n *node) bool {
		if !matches(p.selector, n) || (n.tainted && !p.tolerates) {
			return false
		}
		for k, v := range p.requests {
			if n.free[k] < v {
				return false
			}
		}
		return true
	}
	for _, p := range pods {
		candidates := nodes
		if p.pinned != nil {
			candidates = []*node{p.pinned}
		}
		placed := false
		for _, n := range candidates {
			if fits(p, n) {
				for k, v := range p.requests {
					n.free[k] -= v
				}
				placed = true
				break
			}
		}
		if !placed {
			t.Errorf("pod %s (requests %v, selector %v) fits no node", p.name, p.requests, p.selector)
		}
	}
	if len(pods) < 15 {
		t.Errorf("only %d pods counted", len(pods))
	}
	// The layout keeps a GPU node free for a third elastic worker (`maxNodes: 3`) however the
	// scheduler spreads the GPU pods: more GPU nodes than GPU pods.
	gpuPods, gpuNodes := 0, 0
	for _, p := range pods {
		if p.requests["nvidia.com/gpu"] > 0 {
			gpuPods++
		}
	}
	for _, n := range nodes {
		if n.free["nvidia.com/gpu"] > 0 || n.tainted {
			gpuNodes++
		}
	}
	if gpuNodes <= gpuPods {
		t.Errorf("%d GPU pods on %d GPU nodes: no node is sure to stay free for a third elastic worker", gpuPods, gpuNodes)
	}
}

// TestWorkloadResourceCount: the resources registered do not depend on the number of nodes,
// workers, tasks or etcd... beyond etcd's fixed per-member volumes on the simulated cloud. A
// simulated pool is one resource whatever its size, as a cloud's node pool is (each node used to
// be a resource of its own: 513 of them at 4096 ranks, most of that deployment's time).
func TestWorkloadResourceCount(t *testing.T) {
	count := func(gpuNodes, workers, ps int) map[string]int {
		raw := workloadsRaw(t, map[string]string{
			"nodePools": fmt.Sprintf(`[{"name":"gpu","nodes":%d,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100","cpus":96,"memory":"680Gi"},{"name":"cpu","nodes":64,"cpus":16,"memory":"64Gi"}]`, gpuNodes),
			"elastic":   fmt.Sprintf(`{"enabled":true,"rdzvBackend":"etcd-v2","maxNodes":%d}`, workers),
			"tfcluster": fmt.Sprintf(`{"enabled":true,"workers":{"count":%d,"gpus":8},"ps":{"count":%d}}`, workers, ps),
		})
		m := map[string]int{}
		for _, r := range deploy(t, raw).sorted() {
			m[r.Type]++
		}
		return m
	}
	if d := cmp.Diff(count(8, 2, 1), count(512, 200, 40)); d != "" {
		t.Errorf("resources by type differ between small and large (-small +large):\n%s", d)
	}
}

// TestElasticLaunchScript runs the workers' torchrun wrapper as each worker would, with a
// torchrun that prints its arguments. With c10d, worker 0 alone hosts the rendezvous store:
// torchrun's own guess compares the endpoint (elastic-0.elastic.<ns>.svc) with the pod's names,
// which never match, and left every worker waiting for a store no one served.
func TestElasticLaunchScript(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, map[string]string{"etcd": `{"enabled":false}`,
		"elastic": `{"enabled":true,"pool":"cpu","minNodes":1,"maxNodes":2,"cpu":"4","memory":"8Gi"}`}))
	script := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "elastic-scripts")).Data["torchrun.sh"]
	bin := t.TempDir()
	for name, body := range map[string]string{
		"torchrun": "#!/bin/sh\necho \"$@\"\n",
		"python3":  "#!/bin/sh\nexit 0\n", // python-etcd is there
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "torchrun.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pod, backend, want string }{
		{"elastic-0", "c10d", "--rdzv_conf=is_host=true --nnodes=1:2 train.py"},
		{"elastic-1", "c10d", "--rdzv_conf=is_host=false --nnodes=1:2 train.py"},
		{"elastic-10", "c10d", "--rdzv_conf=is_host=false --nnodes=1:2 train.py"},
		{"elastic-0", "etcd-v2", "--nnodes=1:2 train.py"},
	} {
		cmd := exec.Command("sh", path, "--nnodes=1:2", "train.py")
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "POD_NAME=" + tc.pod, "KOLOTOC_RDZV_BACKEND=" + tc.backend}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v", tc.pod, tc.backend, err)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("%s with %s runs torchrun %q, want %q", tc.pod, tc.backend, got, tc.want)
		}
	}
}

// TestEtcdVolumesAreNewForEachLifeOfTheNamespace: on the simulated cloud etcd's members keep
// their data in host directories, which outlive the stack. They used to be named after the
// namespace alone, so a stack destroyed and created again resumed the old etcd cluster, and the
// new elastic workers read the old rendezvous' store keys (no TTL): each got another round's
// master port and the all-reduce never came (TestEtcdKeepsQuorumForReal, run twice on one
// cluster). The directories now sit under the namespace's UID, and the volumes ignore a change of
// path, so that a volume made before keeps its directory instead of being replaced while bound.
// The elastic workers wait for etcd's StatefulSet itself, not its component.
func TestEtcdVolumesAreNewForEachLifeOfTheNamespace(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	pvs := 0
	for _, r := range rec.ofType(tPV) {
		if !strings.HasPrefix(r.Name, "etcd-") {
			continue
		}
		pvs++
		var path string
		if hp := decode[corev1.PersistentVolume](t, r).Spec.HostPath; hp != nil {
			path = hp.Path
		}
		if !strings.Contains(path, "/"+fakeNamespaceUID+"/") {
			t.Errorf("PersistentVolume %s: host path %q is not under the namespace's UID %s: a new stack of the same name would resume the old etcd data", r.Name, path, fakeNamespaceUID)
		}
		if !slices.Contains(r.IgnoreChanges, "spec.hostPath.path") {
			t.Errorf("PersistentVolume %s ignores changes to %v, want spec.hostPath.path: a volume made before would be replaced while its member's claim is bound", r.Name, r.IgnoreChanges)
		}
	}
	if pvs != 3 {
		t.Fatalf("%d etcd volumes, want 3 (one per member)", pvs)
	}
	workers := rec.one(t, tStatefulSet, "elastic")
	if !slices.Contains(workers.DependsOnURNs, "urn:pulumi:"+workloads+"::kolotoc::kolotoc:etcd:Etcd$kubernetes:apps/v1:StatefulSet::etcd") {
		t.Errorf("the elastic workers do not wait for etcd's StatefulSet (they wait for %v)", workers.DependsOn)
	}
}
