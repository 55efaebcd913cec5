package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
	"kolotoc/stacks"
)

// Least privilege, checked on everything each layout registers: every container is limited and
// unprivileged unless the config asked for an option that needs more (the allow-list below, each
// entry with its reason), every pod passes the Pod Security level its namespace enforces (the
// upstream admission library decides), and every NetworkPolicy selects exactly the pods it is
// meant for and admits exactly the clients it is meant to.

const (
	tNamespace     = "kubernetes:core/v1:Namespace"
	tNetworkPolicy = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
	tCronJob       = "kubernetes:batch/v1:CronJob"
	tPod           = "kubernetes:core/v1:Pod"
	componentLabel = "app.kubernetes.io/component"
)

// securityLayouts are every layout the tests know, plus variants that turn on each option that
// needs more privilege or opens the entrypoint, so that the allow-list is exercised both ways.
func securityLayouts(t *testing.T) map[string]stacks.Raw {
	t.Helper()
	kc := func() string { return fmt.Sprintf(`{"kubeconfig":%q}`, fakeKubeconfig(t)) }
	out := map[string]stacks.Raw{
		"dev":            layoutRaw(t, 0),
		"prod-simulated": layoutRaw(t, 1),
		"workloads":      workloadsRaw(t, nil),
		// Every privileged option at once, a LoadBalancer, monitoring beside the towers, on
		// simulated GPU and CPU pools.
		"dev-options": stackRaw(t, "dev", map[string]string{
			"cluster":          kc(),
			"nodePools":        `[{"name":"gpu","nodes":2,"machineType":"a2-highgpu-8g"},{"name":"cpu","machineType":"n2-standard-16"}]`,
			"carriers":         `{"count":1,"pool":"cpu"}`,
			"towers":           `{"count":2,"gpusPerTower":8,"pool":"gpu","hostNetwork":true}`,
			"sentinels":        `{"enabled":false}`, // refused beside host-network towers (stacks/hostnet.go)
			"storage":          `{"scratch":{"type":"hostPath","path":"/mnt/disks/ssd0"}}`,
			"entrypoint":       fmt.Sprintf(`{"serviceType":"LoadBalancer","sourceRanges":["203.0.113.0/24"],"tlsCertificate":%q}`, testTLSCert(t)),
			"entrypointTLSKey": testTLSKey(t),
			"monitoring":       `{"enabled":true}`,
			"grafanaPassword":  grafanaTestPassword,
		}),
		// No privileged option: an external NFS server and no GPU agents.
		"dev-baseline": stackRaw(t, "dev", map[string]string{
			"cluster":      kc(),
			"storage":      `{"type":"nfs","server":"10.0.0.2","path":"/exports"}`,
			"devicePlugin": `{"enabled":false}`,
		}),
		// The TensorFlow cluster's own TensorBoard, c10d elastic (no etcd client), no entrypoint UI.
		"workloads-variant": workloadsRaw(t, map[string]string{
			"runAsUser":  "1000", // the elastic and TF workers as a user, not root
			"entrypoint": `{"tensorboard":false,"jupyter":false,"daskDashboard":false}`,
			"elastic":    `{"enabled":true,"minNodes":1,"maxNodes":2,"gpusPerNode":8}`,
			"monitoring": `{"enabled":true,"dcgmExporter":false}`,
		}),
	}
	// Runs that release their GPUs, code cloned into every training pod.
	out["runs"] = runsRaw(t, nil)
	out["dev-options"].Secrets["kolotoc:grafanaPassword"] = true
	out["dev-options"].Secrets["kolotoc:entrypointTLSKey"] = true
	for _, s := range cloudStacks {
		out[s.name] = cloudRaw(t, s.name, nil)
	}
	return out
}

// podTemplate is one pod template (or pod) as registered, with where it comes from.
type podTemplate struct {
	owner     string // type and name of the registration
	namespace string
	component string
	labels    map[string]any
	spec      map[string]any
}

// podTemplates lists every pod template the program registers: Deployments, StatefulSets,
// DaemonSets, Jobs, CronJobs and bare Pods.
func podTemplates(t *testing.T, rec *recorder) []podTemplate {
	t.Helper()
	paths := map[string][]string{
		tDeployment: {"spec", "template"}, tStatefulSet: {"spec", "template"}, tDaemonSet: {"spec", "template"},
		tJob: {"spec", "template"}, tCronJob: {"spec", "jobTemplate", "spec", "template"}, tPod: nil,
	}
	var out []podTemplate
	for _, r := range rec.sorted() {
		path, ok := paths[r.Type]
		if !ok {
			continue
		}
		in := inputs(r)
		tmpl := get(in, path...)
		labels, _ := get(tmpl, "metadata", "labels").(map[string]any)
		spec, _ := get(tmpl, "spec").(map[string]any)
		ns, _ := get(in, "metadata", "namespace").(string)
		if spec == nil || ns == "" {
			t.Fatalf("%s %s: no pod spec or namespace", r.Type, r.Name)
		}
		comp, _ := labels[componentLabel].(string)
		out = append(out, podTemplate{owner: r.Type + " " + r.Name, namespace: ns, component: comp, labels: labels, spec: spec})
	}
	if len(out) == 0 {
		t.Fatal("no pod template registered")
	}
	return out
}

// containers returns a pod spec's init containers and containers.
func containers(spec map[string]any) []map[string]any {
	var out []map[string]any
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := spec[key].([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// privilege is one departure from least privilege that a config option asks for.
type privilege struct {
	component, container string // "" container: the pod
	what                 string // what it keeps (see check below)
	why                  string
	asked                func(c *stacks.Config) bool
}

// allowList is every container or pod that keeps more than least privilege, and when.
var allowList = []privilege{
	{"nfs-server", "nfs-server", "privileged", "the kernel NFS server needs a privileged container: the documented cost of storage.type in-cluster-nfs (development only)",
		func(c *stacks.Config) bool { return c.InClusterNFS() }},
	{"nvidia-device-plugin", "", "hostPath /var/lib/kubelet/device-plugins", "the device plugin registers with the kubelet through its socket directory",
		func(c *stacks.Config) bool { return *c.DevicePlugin.Enabled }},
	{"efa-device-plugin", "", "hostPath /var/lib/kubelet/device-plugins", "the EFA device plugin registers with the kubelet through its socket directory",
		func(c *stacks.Config) bool { return c.EFAPools() }},
	{"dcgm-exporter", "", "hostPath /var/lib/kubelet/pod-resources", "the exporter attributes each GPU to the pod holding it through the kubelet's pod-resources socket",
		func(c *stacks.Config) bool { return c.Monitoring.Enabled && *c.Monitoring.DCGMExporter }},
	{"dcgm-exporter", "dcgm-exporter", "capability SYS_ADMIN", "DCGM's profiling metrics; the API server refuses allowPrivilegeEscalation: false beside it",
		func(c *stacks.Config) bool { return c.Monitoring.Enabled && *c.Monitoring.DCGMExporter }},
	{"dcgm-exporter", "dcgm-exporter", "privilege escalation", "implied by CAP_SYS_ADMIN (see above)",
		func(c *stacks.Config) bool { return c.Monitoring.Enabled && *c.Monitoring.DCGMExporter }},
	// Root's sshd only: as kolotoc:runAsUser the towers keep no capability.
	{"tower", "tower", "capability AUDIT_WRITE", "sshd records the launcher's login", rootTowers},
	{"tower", "tower", "capability CHOWN", "sshd hands the session its tty", rootTowers},
	{"tower", "tower", "capability SETGID", "sshd's privilege separation and the session's groups", rootTowers},
	{"tower", "tower", "capability SETUID", "sshd's privilege separation", rootTowers},
	{"tower", "tower", "capability SYS_CHROOT", "sshd's privilege-separated child chroots to /run/sshd", rootTowers},
	{"shared-owner", "chown", "capability CHOWN", "kolotoc:runAsUser: root gives the shared claim's root directory to that user, once",
		func(c *stacks.Config) bool { return c.RunAsUser != 0 }},
	{"tower", "", "hostNetwork", "towers.hostNetwork", func(c *stacks.Config) bool { return c.Towers.HostNetwork }},
	{"prometheus", "", "service account token", "Prometheus discovers its targets through the API server (kubernetes_sd)",
		func(c *stacks.Config) bool { return c.Monitoring.Enabled }},
	// onSuccess release: the token may patch the scale of the run's own StatefulSets, nothing else
	// (meta.NewReleaser; TestRuns checks the roles).
	{"launcher", "", "service account token", "towers.onSuccess release: the launcher scales the towers to zero",
		func(c *stacks.Config) bool { return c.Towers.OnSuccess == meta.OnSuccessRelease }},
	{"elastic", "", "service account token", "elastic.onSuccess release: a worker scales the workers to zero",
		func(c *stacks.Config) bool { return c.Elastic.OnSuccess == meta.OnSuccessRelease }},
	{"tf-chief", "", "service account token", "tfcluster.onSuccess release: the chief scales the task types to zero",
		func(c *stacks.Config) bool { return c.TFCluster.OnSuccess == meta.OnSuccessRelease }},
}

// runsAsNonRoot are the containers (component/container) that run as a user other than root in
// every layout: those that write nothing on the shared claim.
var runsAsNonRoot = map[string]bool{
	"entrypoint/dask-scheduler": true, "entrypoint/tensorboard": true,
	"prometheus/prometheus": true, "grafana/grafana": true,
	// kolotoc:code's clone, in every training pod.
	"tower/code": true, "launcher/code": true, "carrier/code": true, "elastic/code": true,
	"tf-chief/code": true, "tf-worker/code": true, "tf-ps/code": true, "tf-evaluator/code": true,
}

// trainingContainers are the containers (component/container) that run as kolotoc:runAsUser when
// it is set (and as their image's user when it is 0): whatever runs users' code or writes the
// shared claim.
var trainingContainers = map[string]bool{
	"tower/tower": true, "tower/sentinel": true, "launcher/launcher": true, "carrier/dask-worker": true,
	"elastic/worker": true, "tf-chief/chief": true, "tf-worker/worker": true, "tf-ps/ps": true,
	"tf-evaluator/evaluator": true, "entrypoint/jupyter": true, "entrypoint/jupyterlab": true,
}

// enabledTraining lists, per workload the config enables, one training container that must be
// among those registered: the list above must not go stale as containers are renamed.
func enabledTraining(c *stacks.Config) []string {
	var out []string
	add := func(on bool, key string) {
		if on {
			out = append(out, key)
		}
	}
	add(c.Towers.Enabled && !c.Suspend, "tower/tower")
	add(c.Towers.Enabled, "launcher/launcher")
	add(c.Carriers.Enabled, "carrier/dask-worker")
	add(c.Elastic.Enabled && !c.Suspend, "elastic/worker")
	add(c.TFCluster.Enabled && !c.Suspend, "tf-worker/worker")
	add(c.Entrypoint.Jupyter && c.Entrypoint.JupyterUI == entrypoint.UINotebook, "entrypoint/jupyter")
	add(c.Entrypoint.Jupyter && c.Entrypoint.JupyterUI != entrypoint.UINotebook, "entrypoint/jupyterlab")
	return out
}

// wantUser is the uid a container must run as, or 0 when it may keep its image's user.
func wantUser(c *stacks.Config, component, container string) int {
	if c.RunAsUser != 0 && trainingContainers[component+"/"+container] {
		return c.RunAsUser
	}
	return 0
}

// rootTowers: the towers run as root (kolotoc:runAsUser 0), and their sshd needs root's help.
func rootTowers(c *stacks.Config) bool { return c.Towers.Enabled && c.RunAsUser == 0 }

// scratchHostPath: with storage.scratch.type hostPath every workload mounts the node's local SSD.
func scratchHostPath(c *stacks.Config, path string) bool {
	return c.Storage.Scratch.Type == storage.ScratchHostPath && path == c.Storage.Scratch.Path
}

func allowed(c *stacks.Config, component, container, what string) bool {
	for _, p := range allowList {
		if p.component == component && p.container == container && p.what == what {
			return p.asked(c)
		}
	}
	return false
}

// TestLeastPrivilege lists every container each layout registers and fails on any without CPU
// and memory requests and limits, with privilege escalation allowed, with capabilities not
// dropped, or with a host path, host namespace, privilege or token the config did not ask for; and
// on any pod without the runtime's default seccomp profile or with a version label on its template.
func TestLeastPrivilege(t *testing.T) {
	for name, raw := range securityLayouts(t) {
		t.Run(name, func(t *testing.T) {
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			rec := deploy(t, raw)
			n := 0
			seen := map[string]bool{}
			for _, p := range podTemplates(t, rec) {
				check := func(container, what string, bad bool) {
					if bad && !allowed(cfg, p.component, container, what) {
						t.Errorf("%s (component %s) container %q: %s, which the config did not ask for", p.owner, p.component, container, what)
					}
				}
				for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
					check("", k, p.spec[k] == true)
				}
				check("", "service account token", p.spec["automountServiceAccountToken"] != false)
				// The runtime's default seccomp profile on every pod: unconfined is the kubelet's
				// default, and Pod Security restricted asks for a profile.
				if get(p.spec, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
					t.Errorf("%s: no seccompProfile RuntimeDefault on the pod (securityContext %v)", p.owner, p.spec["securityContext"])
				}
				// A version label on a pod template would restart every pod at each upgrade.
				if v, ok := p.labels["app.kubernetes.io/version"]; ok {
					t.Errorf("%s: pod template labelled app.kubernetes.io/version=%v: an upgrade of Kolotoc would restart it", p.owner, v)
				}
				vols, _ := p.spec["volumes"].([]any)
				for _, v := range vols {
					if hp, _ := get(v, "hostPath", "path").(string); hp != "" && !scratchHostPath(cfg, hp) {
						check("", "hostPath "+hp, true)
					}
				}
				for _, c := range containers(p.spec) {
					n++
					cn, _ := c["name"].(string)
					for _, res := range []string{"requests", "limits"} {
						for _, r := range []string{"cpu", "memory"} {
							if v, _ := get(c, "resources", res, r).(string); v == "" {
								t.Errorf("%s container %q: no %s %s", p.owner, cn, r, strings.TrimSuffix(res, "s"))
							}
						}
					}
					sc, _ := c["securityContext"].(map[string]any)
					seen[p.component+"/"+cn] = true
					if uid := wantUser(cfg, p.component, cn); uid != 0 {
						// The container's own runAsUser wins over the pod's.
						got, _ := get(p.spec, "securityContext", "runAsUser").(float64)
						if u, ok := get(sc, "runAsUser").(float64); ok {
							got = u
						}
						group, _ := get(p.spec, "securityContext", "runAsGroup").(float64)
						if g, ok := get(sc, "runAsGroup").(float64); ok {
							group = g
						}
						nonRoot := get(sc, "runAsNonRoot") == true || (get(sc, "runAsNonRoot") == nil && get(p.spec, "securityContext", "runAsNonRoot") == true)
						if int(got) != uid || int(group) != uid || !nonRoot {
							t.Errorf("%s container %q: runs as uid %v gid %v (runAsNonRoot %v), want kolotoc:runAsUser %d for both, never root",
								p.owner, cn, got, group, nonRoot, uid)
						}
					}
					if cfg.RunAsUser != 0 && p.namespace == cfg.Namespace && get(sc, "runAsUser") == float64(0) &&
						!(p.component == "shared-owner" && cn == "chown") {
						t.Errorf("%s container %q: runs as root although kolotoc:runAsUser is %d; only the shared-owner Job may", p.owner, cn, cfg.RunAsUser)
					}
					if runsAsNonRoot[p.component+"/"+cn] {
						user, _ := get(sc, "runAsUser").(float64)
						if get(sc, "runAsNonRoot") != true && get(p.spec, "securityContext", "runAsNonRoot") != true {
							t.Errorf("%s container %q: not runAsNonRoot", p.owner, cn)
						}
						if pu, _ := get(p.spec, "securityContext", "runAsUser").(float64); user == 0 && pu == 0 {
							t.Errorf("%s container %q: no runAsUser: the image's user, root in most", p.owner, cn)
						}
					}
					check(cn, "privileged", get(sc, "privileged") == true)
					if get(sc, "privileged") == true {
						continue // the allow-list's reason covers escalation and capabilities too
					}
					check(cn, "privilege escalation", get(sc, "allowPrivilegeEscalation") != false)
					if !containsString(get(sc, "capabilities", "drop"), "ALL") {
						t.Errorf("%s container %q: capabilities not dropped (drop: [ALL])", p.owner, cn)
					}
					for _, add := range strs(get(sc, "capabilities", "add")) {
						check(cn, "capability "+add, true)
					}
				}
			}
			if n < 4 {
				t.Errorf("only %d containers checked", n)
			}
			for _, key := range enabledTraining(cfg) {
				if !seen[key] {
					t.Errorf("no container %s registered: the test's list of training containers is stale", key)
				}
			}
		})
	}
}

// TestPodSecurityLevels: every pod passes the Pod Security level its namespace enforces, as the
// upstream admission library evaluates it; a namespace is privileged only when an option needs it
// (and then says which), else baseline; audit and warn are restricted.
func TestPodSecurityLevels(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantPrivileged := map[string]bool{ // the stack namespace, by layout
		"prod-simulated": true, "workloads": true, "workloads-variant": true, "dev-options": true, "runs": true, // in-cluster NFS (+ options)
		"dev": false, "dev-baseline": false, "prod": false, "aws": false, "azure": false, // local directory, external NFS, cloud file stores
	}
	for name, raw := range securityLayouts(t) {
		t.Run(name, func(t *testing.T) {
			rec := deploy(t, raw)
			levels := map[string]string{}
			for _, r := range rec.ofType(tNamespace) {
				md := get(inputs(r), "metadata")
				ns, _ := get(md, "name").(string)
				labels, _ := get(md, "labels").(map[string]any)
				enforce, _ := labels["pod-security.kubernetes.io/enforce"].(string)
				levels[ns] = enforce
				if labels["pod-security.kubernetes.io/warn"] != "restricted" || labels["pod-security.kubernetes.io/audit"] != "restricted" {
					t.Errorf("namespace %s: warn/audit are not restricted: %v", ns, labels)
				}
				reason, _ := get(md, "annotations", "kolotoc.dev/pod-security-reason").(string)
				if (enforce == "privileged") != (reason != "") {
					t.Errorf("namespace %s: enforce %s with reason %q; a privileged namespace says why, a baseline one has nothing to explain", ns, enforce, reason)
				}
			}
			stackNS := "kolotoc-" + raw.Stack
			if want := map[bool]string{true: "privileged", false: "baseline"}[wantPrivileged[name]]; levels[stackNS] != want {
				t.Errorf("namespace %s enforces %q, want %s", stackNS, levels[stackNS], want)
			}
			for _, p := range podTemplates(t, rec) {
				level, ok := levels[p.namespace]
				if !ok {
					t.Errorf("%s: namespace %s is not Kolotoc's (no Pod Security level)", p.owner, p.namespace)
					continue
				}
				var spec corev1.PodSpec
				b, _ := json.Marshal(p.spec)
				if err := json.Unmarshal(b, &spec); err != nil {
					t.Fatalf("%s: %v", p.owner, err)
				}
				lv := psaapi.LevelVersion{Level: psaapi.Level(level), Version: psaapi.LatestVersion()}
				res := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &metav1.ObjectMeta{}, &spec))
				if !res.Allowed {
					t.Errorf("%s in %s would be refused by Pod Security %s: %s", p.owner, p.namespace, level, res.ForbiddenDetail())
				}
			}
		})
	}
}

// selectorMatches evaluates a plain LabelSelector (matchLabels, matchExpressions In/NotIn/
// Exists/DoesNotExist) against labels; an empty selector matches everything.
func selectorMatches(t *testing.T, sel any, labels map[string]any) bool {
	t.Helper()
	m, _ := sel.(map[string]any)
	ml, _ := m["matchLabels"].(map[string]any)
	for k, v := range ml {
		if labels[k] != v {
			return false
		}
	}
	exprs, _ := m["matchExpressions"].([]any)
	for _, e := range exprs {
		key, _ := get(e, "key").(string)
		v, has := labels[key]
		values := strs(get(e, "values"))
		s, _ := v.(string)
		switch op := get(e, "operator"); op {
		case "In":
			if !has || !containsStr(values, s) {
				return false
			}
		case "NotIn":
			if has && containsStr(values, s) {
				return false
			}
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		default:
			t.Fatalf("selector operator %v", op)
		}
	}
	return true
}

// podSet is a set of pod templates named namespace/component.
type podSet map[string]bool

func (s podSet) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return "[" + strings.Join(keys, " ") + "]"
}

// TestNetworkPolicies: every namespace with pods denies ingress by default; each allow selects
// exactly the pods of its concern and admits exactly its intended clients on exactly their ports.
// The intent is derived from the pods themselves (which run a Dask worker, which serve ssh,
// which are scraped), not from the code that wrote the policies.
func TestNetworkPolicies(t *testing.T) {
	for name, raw := range securityLayouts(t) {
		t.Run(name, func(t *testing.T) {
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			rec := deploy(t, raw)
			pods := podTemplates(t, rec)
			ns, agents := cfg.Namespace, cfg.GPUAgentsNamespace()
			key := podKey

			// What each pod is, read from its containers.
			is := map[string]podSet{}
			portsOf := map[string]map[string][]int{} // pod key → port name → ports
			processDash := map[string][]int{}        // pod key → every worker process's metrics port
			mark := func(what string, p podTemplate) {
				if is[what] == nil {
					is[what] = podSet{}
				}
				is[what][key(p)] = true
			}
			for _, p := range pods {
				mark("all:"+p.namespace, p)
				mark("component:"+p.component, p)
				if portsOf[key(p)] == nil {
					portsOf[key(p)] = map[string][]int{}
				}
				for _, c := range containers(p.spec) {
					args := strs(c["args"])
					if len(args) >= 2 && args[0] == "dask" && args[1] == "worker" {
						mark("dask-worker", p)
					}
					if len(args) >= 2 && args[0] == "dask" && args[1] == "scheduler" {
						mark("dask-scheduler", p)
					}
					env := envOf(c)
					if env["KOLOTOC_TF_TASK_TYPE"] != nil && env["KOLOTOC_TF_TASK_TYPE"] != "evaluator" {
						mark("tf-task", p)
					}
					if b, ok := env["KOLOTOC_RDZV_BACKEND"].(string); ok && b != "c10d" {
						mark("etcd-client", p)
					}
					list, _ := c["ports"].([]any)
					for _, cp := range list {
						pn, _ := get(cp, "name").(string)
						num, _ := get(cp, "containerPort").(float64)
						portsOf[key(p)][pn] = append(portsOf[key(p)][pn], int(num))
						if pn == "dashboard" || pn == "dask-dash" {
							mark("scraped", p) // what Prometheus's dask job keeps
						}
						if strings.HasPrefix(pn, "dask-dash") {
							// Every worker process's metrics port (dask-dash, dask-dash-1, …).
							processDash[key(p)] = append(processDash[key(p)], int(num))
						}
					}
				}
			}
			union := func(sets ...podSet) podSet {
				out := podSet{}
				for _, s := range sets {
					for k := range s {
						out[k] = true
					}
				}
				return out
			}
			comp := func(c string) podSet { return is["component:"+c] }
			namedPorts := func(set podSet, names ...string) []int {
				var out []int
				for k := range set {
					for _, n := range names {
						out = append(out, portsOf[k][n]...)
					}
				}
				return out
			}
			lb := cfg.Entrypoint.SourceRanges
			if cfg.Entrypoint.ServiceType != entrypoint.ServiceLoadBalancer {
				lb = nil
			}

			// The intent of every allow: its pods, its clients (+ address ranges), its ports
			// (nil: every port; a range is written as its first port).
			type intent struct {
				pods, from podSet
				cidrs      []string
				ports      []int
				// nodes: the cluster's nodes connect (a kubelet's NFS mount). By the
				// specification an ipBlock 0.0.0.0/0 admits them; under Cilium (GKE Dataplane
				// V2, AKS) no ipBlock matches a node (docs.cilium.io, Layer 3 Policies: CIDR
				// rules are for a peer that "is not an endpoint"; cilium/cilium#16308) and no
				// selector does either, so only a rule that lists no peer admits them: Cilium
				// reads it as its wildcard selector, which matches every identity, host and
				// remote-node included (cilium/cilium pkg/k8s/network_policy.go). Such a rule
				// admits anyone, so only an allow that means anyone may have it.
				nodes bool
			}
			daskPeers := union(is["dask-worker"], is["dask-scheduler"])
			// The entrypoint's user-facing ports are the ones its Service offers besides the scheduler.
			var uiPorts []int
			for _, r := range rec.ofType(tService) {
				if in := inputs(r); get(in, "metadata", "name") == entrypoint.Name && get(in, "metadata", "namespace") == ns {
					list, _ := get(in, "spec", "ports").([]any)
					for _, sp := range list {
						if n, _ := get(sp, "port").(float64); get(sp, "name") != "scheduler" {
							uiPorts = append(uiPorts, int(n))
						}
					}
				}
			}
			intents := map[string]intent{
				// Nothing from outside reaches the scheduler, TensorBoard or the dashboard; the
				// LoadBalancer's ranges reach Jupyter alone (HTTPS, password).
				ns + "/dask-scheduler": {pods: is["dask-scheduler"], from: daskPeers, ports: namedPorts(is["dask-scheduler"], "scheduler")},
				ns + "/dask-workers":   {pods: is["dask-worker"], from: daskPeers, ports: []int{40000, 41000}},
				ns + "/entrypoint-ui":  {pods: ifAny(uiPorts, is["dask-scheduler"]), from: is["all:"+ns], ports: uiPorts},
				ns + "/jupyter-public": {pods: ifAny(lb, is["dask-scheduler"]), cidrs: lb, ports: ifAnyPorts(lb, namedPorts(is["dask-scheduler"], "jupyter"))},
				// mpirun: ssh, then orted and ranks on ports picked at run time, both ways.
				ns + "/mpi-towers":     {pods: comp("tower"), from: union(comp("tower"), comp("launcher"))},
				ns + "/mpi-launcher":   {pods: comp("launcher"), from: comp("tower")},
				ns + "/nfs-server":     {pods: comp("nfs-server"), nodes: true, ports: namedPorts(comp("nfs-server"), "nfs", "mountd", "rpcbind")},
				ns + "/etcd-clients":   {pods: comp("etcd"), from: union(comp("etcd"), is["etcd-client"]), ports: namedPorts(comp("etcd"), "client")},
				ns + "/etcd-peers":     {pods: comp("etcd"), from: comp("etcd"), ports: namedPorts(comp("etcd"), "peer")},
				ns + "/elastic-peers":  {pods: comp("elastic"), from: comp("elastic")},
				ns + "/tf-tasks":       {pods: is["tf-task"], from: is["tf-task"], ports: dedupe(namedPorts(is["tf-task"], "grpc"))},
				ns + "/tf-tensorboard": {pods: comp("tf-tensorboard"), from: is["all:"+ns], ports: namedPorts(comp("tf-tensorboard"), "tensorboard")},
				ns + "/monitoring-ui": {pods: union(comp("prometheus"), comp("grafana")), from: is["all:"+ns],
					ports: append(namedPorts(comp("prometheus"), "web"), namedPorts(comp("grafana"), "http")...)},
				ns + "/prometheus-scrape": {pods: ifAny(comp("prometheus"), is["scraped"]), from: comp("prometheus"), ports: dedupe(namedPorts(is["scraped"], "dashboard", "dask-dash"))},
				agents + "/dcgm-scrape":   {pods: comp("dcgm-exporter"), from: comp("prometheus"), ports: namedPorts(comp("dcgm-exporter"), "metrics")},
			}

			denied, egressDenied := map[string]bool{}, map[string]bool{}
			seen := map[string]bool{}
			for _, r := range rec.ofType(tNetworkPolicy) {
				in := inputs(r)
				pns, _ := get(in, "metadata", "namespace").(string)
				pname, _ := get(in, "metadata", "name").(string)
				id := pns + "/" + pname
				if seen[id] {
					t.Errorf("two NetworkPolicies %s", id)
				}
				seen[id] = true
				if pname == "deny-metadata-egress" {
					checkMetadataEgress(t, id, in, pods, pns, is["all:"+pns])
					egressDenied[pns] = true
					continue
				}
				if got := strs(get(in, "spec", "policyTypes")); len(got) != 1 || got[0] != "Ingress" {
					t.Errorf("%s: policyTypes %v, want [Ingress]", id, got)
				}
				selected := podSet{}
				for _, p := range pods {
					if p.namespace == pns && selectorMatches(t, get(in, "spec", "podSelector"), p.labels) {
						selected[key(p)] = true
					}
				}
				rules, _ := get(in, "spec", "ingress").([]any)
				if pname == "default-deny-ingress" {
					if len(rules) != 0 || selected.String() != is["all:"+pns].String() {
						t.Errorf("%s: selects %v with %d rules, want every pod of the namespace and no rule", id, selected, len(rules))
					}
					denied[pns] = true
					continue
				}
				want, ok := intents[id]
				if !ok {
					t.Errorf("%s: a NetworkPolicy this test knows no intent for", id)
					continue
				}
				if len(want.pods) == 0 {
					t.Errorf("%s: a policy for pods the layout does not run", id)
				}
				if selected.String() != want.pods.String() {
					t.Errorf("%s selects %v, want %v", id, selected, want.pods)
				}
				if len(rules) != 1 {
					t.Fatalf("%s: %d ingress rules, want 1", id, len(rules))
				}
				from, cidrs := podSet{}, []string{}
				peers, _ := get(rules[0], "from").([]any)
				if nodesUnderCilium := len(peers) == 0; nodesUnderCilium != want.nodes {
					t.Errorf("%s: admits the cluster's nodes under Cilium: %v (peers %v), want %v", id, nodesUnderCilium, peers, want.nodes)
				}
				for _, peer := range peers {
					if c, _ := get(peer, "ipBlock", "cidr").(string); c != "" {
						cidrs = append(cidrs, c)
						continue
					}
					for _, p := range pods {
						inNS := p.namespace == pns
						if nsSel := get(peer, "namespaceSelector"); nsSel != nil {
							inNS = selectorMatches(t, nsSel, map[string]any{"kubernetes.io/metadata.name": p.namespace})
						}
						if inNS && selectorMatches(t, get(peer, "podSelector"), p.labels) {
							from[key(p)] = true
						}
					}
				}
				if from.String() != want.from.String() {
					t.Errorf("%s admits %v, want %v", id, from, want.from)
				}
				sort.Strings(cidrs)
				wantCIDRs := append([]string(nil), want.cidrs...)
				sort.Strings(wantCIDRs)
				if strings.Join(cidrs, ",") != strings.Join(wantCIDRs, ",") {
					t.Errorf("%s admits addresses %v, want %v", id, cidrs, wantCIDRs)
				}
				var ports []int
				var ranges [][2]int
				list, _ := get(rules[0], "ports").([]any)
				for _, p := range list {
					if n, ok := get(p, "port").(float64); ok {
						ports = append(ports, int(n))
						end, _ := get(p, "endPort").(float64)
						ranges = append(ranges, [2]int{int(n), max(int(n), int(end))})
					}
					if get(p, "protocol") != "TCP" {
						t.Errorf("%s: port %v is not TCP", id, p)
					}
				}
				sort.Ints(ports)
				wantPorts := dedupe(want.ports)
				if fmt.Sprint(ports) != fmt.Sprint(wantPorts) {
					t.Errorf("%s opens ports %v, want %v", id, ports, wantPorts)
				}
				if pname == "prometheus-scrape" {
					// Prometheus reaches every worker process's metrics port, not the first alone.
					for k := range selected {
						for _, port := range processDash[k] {
							if !slices.ContainsFunc(ranges, func(r [2]int) bool { return r[0] <= port && port <= r[1] }) {
								t.Errorf("%s does not open %s's metrics port %d (ranges %v)", id, k, port, ranges)
							}
						}
					}
				}
			}
			// Every intent whose pods run has its policy, and every namespace with pods its
			// default-deny.
			for id, want := range intents {
				if len(want.pods) > 0 && !seen[id] {
					t.Errorf("no NetworkPolicy %s for %v", id, want.pods)
				}
			}
			for _, p := range pods {
				if !denied[p.namespace] {
					t.Errorf("namespace %s runs %s but has no default-deny-ingress", p.namespace, p.owner)
				}
				if !egressDenied[p.namespace] {
					t.Errorf("namespace %s runs %s but does not deny egress to the metadata endpoints", p.namespace, p.owner)
				}
			}
		})
	}
}

// ifAny is set when cond has any member (a policy for pods is meant only when what it serves
// runs), else nothing.
func ifAny[C ~[]int | ~[]string | ~map[string]bool](cond C, set podSet) podSet {
	if len(cond) == 0 {
		return nil
	}
	return set
}

func dedupe(ports []int) []int {
	set := map[int]bool{}
	var out []int
	for _, p := range ports {
		if !set[p] {
			set[p] = true
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}

// ifAnyPorts returns ports when cond is not empty.
func ifAnyPorts(cond []string, ports []int) []int {
	if len(cond) == 0 {
		return nil
	}
	return ports
}

// testTLSCert and testTLSKey are a self-signed certificate for jupyter.kolotoc.test, localhost and
// 127.0.0.1 (valid until 2125) and its key: test data only.
func testTLSCert(t *testing.T) string { return readTestdata(t, "tls/jupyter.crt") }
func testTLSKey(t *testing.T) string  { return readTestdata(t, "tls/jupyter.key") }

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoadBalancerPublishesJupyterOnly: with entrypoint.serviceType LoadBalancer, the only thing
// outside the cluster can reach is Jupyter, over HTTPS with the stack's certificate; the Dask
// scheduler (code execution on every worker), TensorBoard and the dashboard stay in-cluster. The
// key is a secret wherever it goes.
func TestLoadBalancerPublishesJupyterOnly(t *testing.T) {
	raw := securityLayouts(t)["dev-options"]
	rec := deploy(t, raw)
	ns := "kolotoc-" + raw.Stack
	var public, internal map[string]any
	for _, r := range rec.ofType(tService) {
		in := inputs(r)
		if get(in, "metadata", "namespace") != ns {
			continue
		}
		switch get(in, "metadata", "name") {
		case entrypoint.Name:
			internal = in.(map[string]any)
		case entrypoint.Name + "-public":
			public = in.(map[string]any)
		}
		if typ := get(in, "spec", "type"); typ == "LoadBalancer" && get(in, "metadata", "name") != entrypoint.Name+"-public" {
			t.Errorf("Service %v is a LoadBalancer", get(in, "metadata", "name"))
		}
	}
	if public == nil || internal == nil {
		t.Fatalf("want Services %s and %s-public; internal %v, public %v", entrypoint.Name, entrypoint.Name, internal != nil, public != nil)
	}
	if typ := get(internal, "spec", "type"); typ != "ClusterIP" {
		t.Errorf("Service %s type %v, want ClusterIP", entrypoint.Name, typ)
	}
	ports, _ := get(public, "spec", "ports").([]any)
	if len(ports) != 1 || get(ports[0], "port") != float64(443) || get(ports[0], "targetPort") != float64(8888) {
		t.Errorf("public Service ports %v, want Jupyter alone: 443 -> 8888", ports)
	}
	if r := get(public, "spec", "loadBalancerSourceRanges"); fmt.Sprint(r) != "[203.0.113.0/24]" {
		t.Errorf("public Service source ranges %v", r)
	}

	dep := inputs(rec.one(t, tDeployment, "entrypoint"))
	var jupyter map[string]any
	for _, c := range containers(get(dep, "spec", "template", "spec").(map[string]any)) {
		if c["name"] == "jupyterlab" || c["name"] == "jupyter" {
			jupyter = c
		}
	}
	args := fmt.Sprint(get(jupyter, "args"))
	if !strings.Contains(args, "certfile=/etc/kolotoc/tls/tls.crt") || !strings.Contains(args, "keyfile=/etc/kolotoc/tls/tls.key") {
		t.Errorf("Jupyter does not serve HTTPS: args %s", args)
	}
	if s := get(jupyter, "readinessProbe", "httpGet", "scheme"); s != "HTTPS" {
		t.Errorf("Jupyter's probe scheme %v, want HTTPS", s)
	}
	tlsSecret := inputs(rec.one(t, tSecret, "entrypoint-tls"))
	if get(tlsSecret, "type") != "kubernetes.io/tls" {
		t.Errorf("TLS Secret type %v, want kubernetes.io/tls", get(tlsSecret, "type"))
	}
	if d := get(tlsSecret, "stringData"); d != secretMarker {
		t.Errorf("the TLS Secret's data is registered as %.30v…, want a secret", d)
	}
	key := strings.TrimSpace(testTLSKey(t))
	for _, r := range rec.sorted() {
		if b, _ := json.Marshal(inputs(r)); strings.Contains(string(b), key[40:80]) {
			t.Errorf("%s %s holds the TLS key in plain text", r.Type, r.Name)
		}
	}
}

// TestPublicLoadBalancerPerCloud: the stack tells the entrypoint which load balancer fronts it, so
// that Jupyter's pod sees each client's own address, the one jupyter-public admits. On aws the
// in-tree controller is told nlb: left alone it makes a Classic ELB, which proxies TCP ("Unlike
// Classic Elastic Load Balancers, Network Load Balancers (NLBs) forward the client's IP address
// through to the node": kubernetes.io, Service, Network Load Balancer support on AWS). GKE's and
// AKS's load balancers pass the address through with externalTrafficPolicy Local alone (GKE,
// LoadBalancer Service parameters; AKS, Use a public standard load balancer).
func TestPublicLoadBalancerPerCloud(t *testing.T) {
	want := map[string]any{stacks.CloudGCP: nil, stacks.CloudAWS: "nlb", stacks.CloudAzure: nil}
	for _, s := range cloudStacks {
		t.Run(s.name, func(t *testing.T) {
			raw := cloudRaw(t, s.name, map[string]string{
				"entrypoint":       fmt.Sprintf(`{"serviceType":"LoadBalancer","sourceRanges":["203.0.113.0/24"],"tlsCertificate":%q}`, testTLSCert(t)),
				"entrypointTLSKey": testTLSKey(t),
			})
			raw.Secrets["kolotoc:entrypointTLSKey"] = true
			in := inputs(deploy(t, raw).one(t, tService, entrypoint.Name+"-public"))
			got := []any{get(in, "spec", "externalTrafficPolicy"), get(in, "metadata", "annotations", entrypoint.AWSLoadBalancerTypeAnnotation)}
			if fmt.Sprint(got) != fmt.Sprint([]any{"Local", want[s.cloud]}) {
				t.Errorf("%s: externalTrafficPolicy, %s = %v, want [Local %v]", s.cloud, entrypoint.AWSLoadBalancerTypeAnnotation, got, want[s.cloud])
			}
		})
	}
}

// podKey names a pod template by namespace and component.
func podKey(p podTemplate) string { return p.namespace + "/" + p.component }

// checkMetadataEgress: the namespace's egress policy selects every pod and lets them reach
// everything but the clouds' metadata endpoints, IPv4 and IPv6.
func checkMetadataEgress(t *testing.T, id string, in any, pods []podTemplate, ns string, all podSet) {
	t.Helper()
	if got := strs(get(in, "spec", "policyTypes")); fmt.Sprint(got) != "[Egress]" {
		t.Errorf("%s: policyTypes %v, want [Egress]", id, got)
	}
	selected := podSet{}
	for _, p := range pods {
		if p.namespace == ns && selectorMatches(t, get(in, "spec", "podSelector"), p.labels) {
			selected[podKey(p)] = true
		}
	}
	if selected.String() != all.String() {
		t.Errorf("%s selects %v, want every pod of %s", id, selected, ns)
	}
	rules, _ := get(in, "spec", "egress").([]any)
	if len(rules) != 1 || get(rules[0], "ports") != nil {
		t.Fatalf("%s: egress rules %v, want one rule for every port", id, rules)
	}
	want := map[string][]string{
		"0.0.0.0/0": {"169.254.169.252/32", "169.254.169.254/32", "169.254.170.23/32"},
		"::/0":      {"fd00:ec2::23/128", "fd00:ec2::254/128"},
	}
	// Besides the address blocks, every pod of the cluster by selector, and nothing else: Cilium
	// (GKE Dataplane V2, AKS) matches no pod by an ipBlock (testbed/checks/flowcheck's cilium mode).
	got := map[string][]string{}
	everyPod := 0
	peers, _ := get(rules[0], "to").([]any)
	for _, peer := range peers {
		pm, _ := peer.(map[string]any)
		if ns, ok := pm["namespaceSelector"].(map[string]any); ok && len(ns) == 0 && len(pm) == 1 {
			everyPod++
			continue
		}
		cidr, _ := get(peer, "ipBlock", "cidr").(string)
		if cidr == "" {
			t.Errorf("%s: egress to %v, want address blocks and every pod by an empty namespace selector only", id, peer)
		}
		got[cidr] = strs(get(peer, "ipBlock", "except"))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: egress to %v, want %v", id, got, want)
	}
	if everyPod != 1 {
		t.Errorf("%s: %d peers select every pod of the cluster, want 1: under Cilium an ipBlock admits no pod, and pods would lose DNS and each other", id, everyPod)
	}
}

// TestPodMetadataAccess: cluster.podMetadataAccess: true (pods that use Workload Identity or Pod
// Identity) drops the metadata egress policy, and nothing else.
func TestPodMetadataAccess(t *testing.T) {
	policies := func(raw stacks.Raw) []string {
		var out []string
		for _, r := range deploy(t, raw).ofType(tNetworkPolicy) {
			out = append(out, fmt.Sprint(get(inputs(r), "metadata", "name")))
		}
		sort.Strings(out)
		return out
	}
	raw := securityLayouts(t)["dev-baseline"]
	closed := policies(raw)
	raw.Values["kolotoc:cluster"] = fmt.Sprintf(`{"kubeconfig":%q,"podMetadataAccess":true}`, fakeKubeconfig(t))
	open := policies(raw)
	if want := slices.DeleteFunc(slices.Clone(closed), func(n string) bool { return n == "deny-metadata-egress" }); fmt.Sprint(open) != fmt.Sprint(want) || len(want) == len(closed) {
		t.Errorf("policies with podMetadataAccess %v, without %v: want the same less deny-metadata-egress", open, closed)
	}
}
