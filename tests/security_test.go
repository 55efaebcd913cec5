package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
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
	labels    map[string]string
	spec      corev1.PodSpec
}

// podTemplates lists every pod template the program registers: Deployments, StatefulSets,
// DaemonSets, Jobs, CronJobs and bare Pods.
func podTemplates(t *testing.T, rec *recorder) []podTemplate {
	t.Helper()
	var out []podTemplate
	for _, r := range rec.sorted() {
		var tmpl corev1.PodTemplateSpec
		switch r.Type {
		case tDeployment, tStatefulSet, tDaemonSet, tJob:
			tmpl = templateOf(t, r)
		case tCronJob:
			tmpl = decode[batchv1.CronJob](t, r).Spec.JobTemplate.Spec.Template
		case tPod:
			pod := decode[corev1.Pod](t, r)
			tmpl = corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
		default:
			continue
		}
		ns := rendertest.DecodeSome[metav1.PartialObjectMetadata](t, r).Namespace
		if len(tmpl.Spec.Containers) == 0 || ns == "" {
			t.Fatalf("%s %s: no pod spec or namespace", r.Type, r.Name)
		}
		out = append(out, podTemplate{owner: r.Type + " " + r.Name, namespace: ns, component: tmpl.Labels[componentLabel], labels: tmpl.Labels, spec: tmpl.Spec})
	}
	if len(out) == 0 {
		t.Fatal("no pod template registered")
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
	// As upstream's chart runs it (eks-charts, stable/aws-efa-k8s-device-plugin, daemonset.yaml).
	{"efa-device-plugin", "", "hostPath /dev/infiniband", "the EFA device plugin finds the node's EFA devices there and hands them to the pods",
		func(c *stacks.Config) bool { return c.EFAPools() }},
	{"efa-device-plugin", "", "hostNetwork", "upstream's chart runs the EFA device plugin on the node's network",
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
				check("", "hostNetwork", p.spec.HostNetwork)
				check("", "hostPID", p.spec.HostPID)
				check("", "hostIPC", p.spec.HostIPC)
				check("", "service account token", !isFalse(p.spec.AutomountServiceAccountToken))
				pod := p.spec.SecurityContext
				if pod == nil {
					pod = &corev1.PodSecurityContext{}
				}
				// The runtime's default seccomp profile on every pod: unconfined is the kubelet's
				// default, and Pod Security restricted asks for a profile.
				if pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: no seccompProfile RuntimeDefault on the pod (securityContext %+v)", p.owner, p.spec.SecurityContext)
				}
				// A version label on a pod template would restart every pod at each upgrade.
				if v, ok := p.labels["app.kubernetes.io/version"]; ok {
					t.Errorf("%s: pod template labelled app.kubernetes.io/version=%v: an upgrade of Kolotoc would restart it", p.owner, v)
				}
				for _, v := range p.spec.Volumes {
					if v.HostPath != nil && v.HostPath.Path != "" && !scratchHostPath(cfg, v.HostPath.Path) {
						check("", "hostPath "+v.HostPath.Path, true)
					}
				}
				for _, c := range containersOf(p.spec) {
					n++
					cn := c.Name
					for res, list := range map[string]corev1.ResourceList{"request": c.Resources.Requests, "limit": c.Resources.Limits} {
						for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
							if q, ok := list[r]; !ok || q.IsZero() {
								t.Errorf("%s container %q: no %s %s", p.owner, cn, r, res)
							}
						}
					}
					sc := c.SecurityContext
					if sc == nil {
						sc = &corev1.SecurityContext{}
					}
					seen[p.component+"/"+cn] = true
					if uid := wantUser(cfg, p.component, cn); uid != 0 {
						// The container's own runAsUser wins over the pod's.
						got, group := orInt(sc.RunAsUser, pod.RunAsUser), orInt(sc.RunAsGroup, pod.RunAsGroup)
						nonRoot := isTrue(sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && isTrue(pod.RunAsNonRoot))
						if got != int64(uid) || group != int64(uid) || !nonRoot {
							t.Errorf("%s container %q: runs as uid %v gid %v (runAsNonRoot %v), want kolotoc:runAsUser %d for both, never root",
								p.owner, cn, got, group, nonRoot, uid)
						}
					}
					if cfg.RunAsUser != 0 && p.namespace == cfg.Namespace && sc.RunAsUser != nil && *sc.RunAsUser == 0 &&
						!(p.component == "shared-owner" && cn == "chown") {
						t.Errorf("%s container %q: runs as root although kolotoc:runAsUser is %d; only the shared-owner Job may", p.owner, cn, cfg.RunAsUser)
					}
					if runsAsNonRoot[p.component+"/"+cn] {
						if !isTrue(sc.RunAsNonRoot) && !isTrue(pod.RunAsNonRoot) {
							t.Errorf("%s container %q: not runAsNonRoot", p.owner, cn)
						}
						if orInt(sc.RunAsUser, nil) == 0 && orInt(pod.RunAsUser, nil) == 0 {
							t.Errorf("%s container %q: no runAsUser: the image's user, root in most", p.owner, cn)
						}
					}
					check(cn, "privileged", isTrue(sc.Privileged))
					if isTrue(sc.Privileged) {
						continue // the allow-list's reason covers escalation and capabilities too
					}
					check(cn, "privilege escalation", !isFalse(sc.AllowPrivilegeEscalation))
					if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
						t.Errorf("%s container %q: capabilities not dropped (drop: [ALL])", p.owner, cn)
					}
					if sc.Capabilities != nil {
						for _, add := range sc.Capabilities.Add {
							check(cn, "capability "+string(add), true)
						}
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
				md := decode[corev1.Namespace](t, r).ObjectMeta
				ns, labels := md.Name, md.Labels
				enforce := labels["pod-security.kubernetes.io/enforce"]
				levels[ns] = enforce
				if labels["pod-security.kubernetes.io/warn"] != "restricted" || labels["pod-security.kubernetes.io/audit"] != "restricted" {
					t.Errorf("namespace %s: warn/audit are not restricted: %v", ns, labels)
				}
				reason := md.Annotations["kolotoc.dev/pod-security-reason"]
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
				lv := psaapi.LevelVersion{Level: psaapi.Level(level), Version: psaapi.LatestVersion()}
				res := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &metav1.ObjectMeta{}, &p.spec))
				if !res.Allowed {
					t.Errorf("%s in %s would be refused by Pod Security %s: %s", p.owner, p.namespace, level, res.ForbiddenDetail())
				}
			}
		})
	}
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
			processPorts := map[string][]int{}       // pod key → its worker processes' and nannies' ports (--worker-port, --nanny-port)
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
				for _, c := range containersOf(p.spec) {
					args := c.Args
					if len(args) >= 2 && args[0] == "dask" && args[1] == "worker" {
						mark("dask-worker", p)
						for i, a := range args[:len(args)-1] {
							if a == "--worker-port" || a == "--nanny-port" {
								processPorts[key(p)] = append(processPorts[key(p)], portSpan(t, args[i+1])...)
							}
						}
					}
					if len(args) >= 2 && args[0] == "dask" && args[1] == "scheduler" {
						mark("dask-scheduler", p)
					}
					env := envVars(c)
					if e, ok := env["KOLOTOC_TF_TASK_TYPE"]; ok && e.Value != "evaluator" {
						mark("tf-task", p)
					}
					if e, ok := env["KOLOTOC_RDZV_BACKEND"]; ok && e.ValueFrom == nil && e.Value != "c10d" {
						mark("etcd-client", p)
					}
					for _, cp := range c.Ports {
						pn, num := cp.Name, cp.ContainerPort
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
			portsIn := func(of map[string][]int, set podSet) []int {
				var out []int
				for k := range set {
					out = append(out, of[k]...)
				}
				return dedupe(out)
			}
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
			// (nil: every port).
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
				if svc := decode[corev1.Service](t, r); svc.Name == entrypoint.Name && svc.Namespace == ns {
					for _, sp := range svc.Spec.Ports {
						if sp.Name != "scheduler" {
							uiPorts = append(uiPorts, int(sp.Port))
						}
					}
				}
			}
			intents := map[string]intent{
				// Nothing from outside reaches the scheduler, TensorBoard or the dashboard; the
				// LoadBalancer's ranges reach Jupyter alone (HTTPS, password).
				ns + "/dask-scheduler": {pods: is["dask-scheduler"], from: daskPeers, ports: namedPorts(is["dask-scheduler"], "scheduler")},
				// Every port a worker process or nanny listens on, and no other (one by one: no
				// endPort, which Cilium before 1.16 reads as the first port alone).
				ns + "/dask-workers":   {pods: is["dask-worker"], from: daskPeers, ports: portsIn(processPorts, is["dask-worker"])},
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
				ns + "/prometheus-scrape": {pods: ifAny(comp("prometheus"), is["scraped"]), from: comp("prometheus"),
					ports: dedupe(append(namedPorts(is["scraped"], "dashboard"), portsIn(processDash, is["scraped"])...))},
				agents + "/dcgm-scrape": {pods: comp("dcgm-exporter"), from: comp("prometheus"), ports: namedPorts(comp("dcgm-exporter"), "metrics")},
			}

			denied, egressDenied := map[string]bool{}, map[string]bool{}
			seen := map[string]bool{}
			for _, r := range rec.ofType(tNetworkPolicy) {
				in := decode[networkingv1.NetworkPolicy](t, r)
				pns, pname := in.Namespace, in.Name
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
				if got := in.Spec.PolicyTypes; len(got) != 1 || got[0] != networkingv1.PolicyTypeIngress {
					t.Errorf("%s: policyTypes %v, want [Ingress]", id, got)
				}
				selected := podSet{}
				for _, p := range pods {
					if p.namespace == pns && selectorMatches(t, &in.Spec.PodSelector, p.labels) {
						selected[key(p)] = true
					}
				}
				rules := in.Spec.Ingress
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
				peers := rules[0].From
				if nodesUnderCilium := len(peers) == 0; nodesUnderCilium != want.nodes {
					t.Errorf("%s: admits the cluster's nodes under Cilium: %v (peers %v), want %v", id, nodesUnderCilium, peers, want.nodes)
				}
				for _, peer := range peers {
					if peer.IPBlock != nil && peer.IPBlock.CIDR != "" {
						cidrs = append(cidrs, peer.IPBlock.CIDR)
						continue
					}
					for _, p := range pods {
						inNS := p.namespace == pns
						if peer.NamespaceSelector != nil {
							inNS = selectorMatches(t, peer.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": p.namespace})
						}
						if inNS && selectorMatches(t, peer.PodSelector, p.labels) {
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
				for _, p := range rules[0].Ports {
					if p.Port != nil {
						n := p.Port.IntValue()
						ports = append(ports, n)
						end := 0
						if p.EndPort != nil {
							end = int(*p.EndPort)
							t.Errorf("%s: port %d has endPort %d, which Cilium before 1.16 reads as port %d alone; list the ports", id, n, end, n)
						}
						ranges = append(ranges, [2]int{n, max(n, end)})
					}
					if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
						t.Errorf("%s: port %+v is not TCP", id, p)
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

// portSpan is the ports of dask's port argument: one port, or <first>:<last>.
func portSpan(t *testing.T, arg string) []int {
	t.Helper()
	first, last, isRange := strings.Cut(arg, ":")
	if !isRange {
		last = first
	}
	a, err1 := strconv.Atoi(first)
	b, err2 := strconv.Atoi(last)
	if err1 != nil || err2 != nil || b < a {
		t.Fatalf("dask port argument %q: want <port> or <first>:<last>", arg)
	}
	var out []int
	for p := a; p <= b; p++ {
		out = append(out, p)
	}
	return out
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
	var public, internal *corev1.Service
	for _, r := range rec.ofType(tService) {
		svc := decode[corev1.Service](t, r)
		if svc.Namespace != ns {
			continue
		}
		switch svc.Name {
		case entrypoint.Name:
			internal = &svc
		case entrypoint.Name + "-public":
			public = &svc
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Name != entrypoint.Name+"-public" {
			t.Errorf("Service %v is a LoadBalancer", svc.Name)
		}
	}
	if public == nil || internal == nil {
		t.Fatalf("want Services %s and %s-public; internal %v, public %v", entrypoint.Name, entrypoint.Name, internal != nil, public != nil)
	}
	if typ := internal.Spec.Type; typ != corev1.ServiceTypeClusterIP {
		t.Errorf("Service %s type %v, want ClusterIP", entrypoint.Name, typ)
	}
	ports := public.Spec.Ports
	if len(ports) != 1 || ports[0].Port != 443 || ports[0].TargetPort.IntValue() != 8888 {
		t.Errorf("public Service ports %+v, want Jupyter alone: 443 -> 8888", ports)
	}
	if r := public.Spec.LoadBalancerSourceRanges; fmt.Sprint(r) != "[203.0.113.0/24]" {
		t.Errorf("public Service source ranges %v", r)
	}

	var jupyter corev1.Container
	for _, c := range containersOf(templateOf(t, rec.one(t, tDeployment, "entrypoint")).Spec) {
		if c.Name == "jupyterlab" || c.Name == "jupyter" {
			jupyter = c
		}
	}
	args := fmt.Sprint(jupyter.Args)
	if !strings.Contains(args, "certfile=/etc/kolotoc/tls/tls.crt") || !strings.Contains(args, "keyfile=/etc/kolotoc/tls/tls.key") {
		t.Errorf("Jupyter does not serve HTTPS: args %s", args)
	}
	if pr := jupyter.ReadinessProbe; pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("Jupyter's probe %+v, want scheme HTTPS", pr)
	}
	// The Secret's data is registered as a secret (SecretMarker), which its typed form cannot hold.
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
			svc := decode[corev1.Service](t, deploy(t, raw).one(t, tService, entrypoint.Name+"-public"))
			var lbType any
			if v, ok := svc.Annotations[entrypoint.AWSLoadBalancerTypeAnnotation]; ok {
				lbType = v
			}
			got := []any{svc.Spec.ExternalTrafficPolicy, lbType}
			if fmt.Sprint(got) != fmt.Sprint([]any{"Local", want[s.cloud]}) {
				t.Errorf("%s: externalTrafficPolicy, %s = %v, want [Local %v]", s.cloud, entrypoint.AWSLoadBalancerTypeAnnotation, got, want[s.cloud])
			}
		})
	}
}

// podKey names a pod template by namespace and component.
func podKey(p podTemplate) string { return p.namespace + "/" + p.component }

// checkMetadataEgress: the namespace's egress policy selects every pod and lets them reach every
// IPv4 address but the clouds' metadata endpoints, and every pod; no IPv6 outside the cluster.
func checkMetadataEgress(t *testing.T, id string, in networkingv1.NetworkPolicy, pods []podTemplate, ns string, all podSet) {
	t.Helper()
	if got := in.Spec.PolicyTypes; fmt.Sprint(got) != "[Egress]" {
		t.Errorf("%s: policyTypes %v, want [Egress]", id, got)
	}
	selected := podSet{}
	for _, p := range pods {
		if p.namespace == ns && selectorMatches(t, &in.Spec.PodSelector, p.labels) {
			selected[podKey(p)] = true
		}
	}
	if selected.String() != all.String() {
		t.Errorf("%s selects %v, want every pod of %s", id, selected, ns)
	}
	rules := in.Spec.Egress
	if len(rules) != 2 || rules[0].Ports != nil {
		t.Fatalf("%s: egress rules %+v, want one rule for every port and GKE's Cloud DNS resolver", id, rules)
	}
	// The second: DNS alone to the metadata address that is GKE's Cloud DNS resolver, so that pods
	// resolve names there (isolation.MetadataDNS).
	dns := rules[1]
	var dnsPorts []string
	for _, p := range dns.Ports {
		if p.Protocol != nil && p.Port != nil && p.EndPort == nil {
			dnsPorts = append(dnsPorts, string(*p.Protocol)+"/"+p.Port.String())
		}
	}
	if len(dns.To) != 1 || dns.To[0].IPBlock == nil || dns.To[0].IPBlock.CIDR != "169.254.169.254/32" || len(dns.To[0].IPBlock.Except) > 0 ||
		dns.To[0].PodSelector != nil || dns.To[0].NamespaceSelector != nil || fmt.Sprint(dnsPorts) != "[UDP/53 TCP/53]" {
		t.Errorf("%s: second egress rule %+v, want 169.254.169.254/32 on UDP and TCP 53 only", id, dns)
	}
	// No IPv6 block: Cilium reads ::/0 as the whole world on an IPv4 cluster, IPv4 metadata
	// included (isolation.RenderDenyEgress).
	want := map[string][]string{
		"0.0.0.0/0": {"169.254.169.252/32", "169.254.169.254/32", "169.254.170.23/32"},
	}
	// Besides the address blocks, every pod of the cluster by selector, and nothing else: Cilium
	// (GKE Dataplane V2, AKS) matches no pod by an ipBlock (testbed/checks/flowcheck's cilium mode).
	got := map[string][]string{}
	everyPod := 0
	for _, peer := range rules[0].To {
		if nsSel := peer.NamespaceSelector; nsSel != nil && len(nsSel.MatchLabels)+len(nsSel.MatchExpressions) == 0 && peer.PodSelector == nil && peer.IPBlock == nil {
			everyPod++
			continue
		}
		if peer.IPBlock == nil || peer.IPBlock.CIDR == "" {
			t.Errorf("%s: egress to %+v, want address blocks and every pod by an empty namespace selector only", id, peer)
			continue
		}
		got[peer.IPBlock.CIDR] = peer.IPBlock.Except
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
			out = append(out, nameOf(t, r))
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
