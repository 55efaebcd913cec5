package tests

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/entrypoint"
	"kolotoc/components/meta/rendertest"
	"kolotoc/stacks"
)

// deployOutputs runs the program under the recording mock, as Deploy does, and resolves every
// stack output it exports.
func deployOutputs(t *testing.T, raw stacks.Raw) (*recorder, map[string]output) {
	t.Helper()
	return deployOutputsWith(t, raw, &recorder{})
}

func deployOutputsWith(t *testing.T, raw stacks.Raw, rec *recorder) (*recorder, map[string]output) {
	t.Helper()
	cfg, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]output{}
	err = pulumi.RunErr(func(ctx *pulumi.Context) error {
		outs := pulumi.Map{}
		if err := stacks.DeployTo(ctx, cfg, func(k string, v pulumi.Input) {
			if _, dup := outs[k]; dup {
				t.Errorf("output %s exported twice", k)
			}
			outs[k] = v
		}); err != nil {
			return err
		}
		return awaitOutputs(ctx, outs, got)
	}, pulumi.WithMocks(raw.Project, raw.Stack, rec))
	if err != nil {
		t.Fatal(err)
	}
	return rec, got
}

// localAccess is the kube access of a simulated or existing stack.
func localAccess(t *testing.T, cfg *stacks.Config) stacks.KubeAccess {
	t.Helper()
	k, err := stacks.LocalKubeAccess(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func str(t *testing.T, outs map[string]output, key string) string {
	t.Helper()
	o, ok := outs[key]
	if !ok {
		t.Fatalf("output %s missing", key)
	}
	s, _ := o.value.(string)
	return s
}

// kubeconfigOf is the kubeconfig path a raw config names.
func kubeconfigOf(t *testing.T, raw stacks.Raw) string {
	t.Helper()
	cfg, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Cluster.Kubeconfig
}

// TestKubeAccess: per cloud, the command that puts the stack's cluster in the user's kubeconfig
// and the context it creates there, which every printed kubectl command names. On the clouds the
// command names the cluster Kolotoc registered (name, location, project, resource group).
func TestKubeAccess(t *testing.T) {
	kc := fakeKubeconfig(t) // absolute, as KOLOTOC_KUBECONFIG is in the e2e suite
	cases := []struct {
		name        string
		raw         func(t *testing.T) stacks.Raw
		wantContext string
		wantCommand string
		local       bool // existing, simulated: --kubeconfig <the configured file> too
		check       func(t *testing.T, rec *recorder)
	}{
		{
			name: "gcp regional, project unset", raw: func(t *testing.T) stacks.Raw { return cloudRaw(t, "prod", nil) },
			// GKE reports the provider's default project once the cluster exists.
			wantContext: "gke_" + fakeGCPProject + "_us-central1_kolotoc-prod",
			wantCommand: "gcloud container clusters get-credentials kolotoc-prod --region us-central1 --project " + fakeGCPProject,
			check: func(t *testing.T, rec *recorder) {
				cl := inputs(rec.one(t, tGKECluster, "cluster"))
				if get(cl, "name") != "kolotoc-prod" || get(cl, "location") != "us-central1" || get(cl, "project") != nil {
					t.Errorf("GKE cluster %v %v %v", get(cl, "name"), get(cl, "location"), get(cl, "project"))
				}
			},
		},
		{
			name: "gcp zonal with a project",
			raw: func(t *testing.T) stacks.Raw {
				return cloudRaw(t, "prod", map[string]string{"cluster": `{"region":"us-central1","zone":"us-central1-a","project":"ml-team-42"}`})
			},
			wantContext: "gke_ml-team-42_us-central1-a_kolotoc-prod",
			wantCommand: "gcloud container clusters get-credentials kolotoc-prod --zone us-central1-a --project ml-team-42",
			check: func(t *testing.T, rec *recorder) {
				cl := inputs(rec.one(t, tGKECluster, "cluster"))
				if get(cl, "location") != "us-central1-a" || get(cl, "project") != "ml-team-42" {
					t.Errorf("GKE cluster %v %v", get(cl, "location"), get(cl, "project"))
				}
			},
		},
		{
			name: "aws", raw: func(t *testing.T) stacks.Raw { return cloudRaw(t, "aws", nil) },
			wantContext: "kolotoc-aws",
			wantCommand: "aws eks update-kubeconfig --name kolotoc-aws --region us-east-1 --alias kolotoc-aws",
			check: func(t *testing.T, rec *recorder) {
				if n := get(inputs(rec.one(t, tEKSCluster, "cluster")), "name"); n != "kolotoc-aws" {
					t.Errorf("EKS cluster %v", n)
				}
			},
		},
		{
			name: "aws with cluster.context",
			raw: func(t *testing.T) stacks.Raw {
				return cloudRaw(t, "aws", map[string]string{"cluster": `{"region":"eu-west-1","zones":["eu-west-1a","eu-west-1b"],"context":"team-a"}`})
			},
			wantContext: "team-a",
			wantCommand: "aws eks update-kubeconfig --name kolotoc-aws --region eu-west-1 --alias team-a",
		},
		{
			name: "azure", raw: func(t *testing.T) stacks.Raw { return cloudRaw(t, "azure", nil) },
			wantContext: "kolotoc-azure",
			wantCommand: "az aks get-credentials --resource-group kolotoc-azure-rg --name kolotoc-azure --context kolotoc-azure",
			check: func(t *testing.T, rec *recorder) {
				aks := inputs(rec.one(t, tAKSCluster, "cluster"))
				rg := inputs(rec.one(t, tResourceGroup, "cluster"))
				if get(aks, "resourceName") != "kolotoc-azure" || get(rg, "resourceGroupName") != "kolotoc-azure-rg" {
					t.Errorf("AKS %v in %v", get(aks, "resourceName"), get(rg, "resourceGroupName"))
				}
			},
		},
		{
			name: "existing, the kubeconfig's current context",
			raw: func(t *testing.T) stacks.Raw {
				return workloadsRaw(t, map[string]string{"cloud": "existing", "cluster": fmt.Sprintf(`{"kubeconfig":%q}`, kc)})
			},
			wantContext: "local", wantCommand: "export KUBECONFIG=" + kc, local: true,
		},
		{
			name: "existing, cluster.context",
			raw: func(t *testing.T) stacks.Raw {
				return workloadsRaw(t, map[string]string{"cloud": "existing", "cluster": fmt.Sprintf(`{"kubeconfig":%q,"context":"training"}`, kc)})
			},
			wantContext: "training", wantCommand: "export KUBECONFIG=" + kc, local: true,
		},
		{
			name: "simulated (dev)", raw: func(t *testing.T) stacks.Raw { return layoutRaw(t, 0) },
			wantContext: "local", local: true, // the path: layoutRaw's own kubeconfig, below
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw(t)
			rec, outs := deployOutputs(t, raw)
			ctx, cmd := str(t, outs, stacks.KubeContextOutput), str(t, outs, stacks.KubeconfigCommandOutput)
			wantCommand := tc.wantCommand
			if wantCommand == "" {
				wantCommand = "export KUBECONFIG=" + bashQuote(kubeconfigOf(t, raw))
			}
			if ctx != tc.wantContext || cmd != wantCommand {
				t.Errorf("kubeContext %q, kubeconfigCommand %q;\nwant %q, %q", ctx, cmd, tc.wantContext, wantCommand)
			}
			prefix := "kubectl --context " + tc.wantContext + " "
			if tc.local {
				prefix = "kubectl --kubeconfig " + bashQuote(kubeconfigOf(t, raw)) + " --context " + tc.wantContext + " "
			}
			if got := str(t, outs, "jupyterPortForward"); !strings.HasPrefix(got, prefix) {
				t.Errorf("jupyterPortForward %q does not start with %q", got, prefix)
			}
			if tc.check != nil {
				tc.check(t, rec)
			}
		})
	}
}

// TestKubeAccessDefaultKubeconfig: the simulated cloud's default kubeconfig, .kolotoc/kubeconfig,
// is relative to the project directory, where Pulumi runs the program; the printed commands name
// it by its absolute path (and its current context, kwokctl's kwok-<cluster>), so that they work
// from any directory.
func TestKubeAccessDefaultKubeconfig(t *testing.T) {
	raw := layoutRaw(t, 0)
	raw.Values["kolotoc:cluster"] = `{}`
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".kolotoc"), 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := strings.ReplaceAll(fakeKubeconfigText, "local", "kwok-kolotoc")
	if err := os.WriteFile(filepath.Join(dir, ".kolotoc", "kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	_, outs := deployOutputs(t, raw)
	path := filepath.Join(dir, ".kolotoc", "kubeconfig")
	if got, want := str(t, outs, stacks.KubeconfigCommandOutput), "export KUBECONFIG="+path; got != want {
		t.Errorf("kubeconfigCommand %q, want %q", got, want)
	}
	if got, want := str(t, outs, "launcherLogs"), "kubectl --kubeconfig "+path+" --context kwok-kolotoc -n kolotoc-dev logs -f job/launcher -c launcher"; got != want {
		t.Errorf("launcherLogs %q, want %q", got, want)
	}
}

// TestKubeAccessQuoting: a kubeconfig path or context that bash would split is quoted.
func TestKubeAccessQuoting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my clusters")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(fakeKubeconfigText), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := workloadsRaw(t, map[string]string{"cloud": "existing", "cluster": fmt.Sprintf(`{"kubeconfig":%q,"context":"team's cluster"}`, path)})
	_, outs := deployOutputs(t, raw)
	// What bash makes of the printed command: its words.
	words := func(command string) []string {
		out, err := exec.Command("bash", "-c", `eval "set -- $1"; printf '%s\n' "$@"`, "bash", command).Output()
		if err != nil {
			t.Fatalf("bash: %v", err)
		}
		return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	}
	want := []string{"kubectl", "--kubeconfig", path, "--context", "team's cluster", "-n", "kolotoc-workloads", "exec", "-it", "elastic-0", "-c", "worker", "--", "bash"}
	if got := words(str(t, outs, "gotoElastic")); !slices.Equal(got, want) {
		t.Errorf("gotoElastic is %q to bash, want %q", got, want)
	}
	if got := words(str(t, outs, stacks.KubeconfigCommandOutput)); !slices.Equal(got, []string{"export", "KUBECONFIG=" + path}) {
		t.Errorf("kubeconfigCommand is %q to bash", got)
	}
}

// bashQuote quotes a word for bash as the program does: only when it holds more than the
// characters of plain paths and names.
func bashQuote(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// kubectlWord finds kubectl as a command word.
var kubectlWord = regexp.MustCompile(`(^|[^A-Za-z0-9_./-])kubectl([^A-Za-z0-9_-]|$)`)

// TestPrintedKubectlBound: every kubectl command among every stack's outputs (the entrypoint's,
// the towers', the workloads', the LoadBalancer's, whichever a layout has) names the stack's
// kube context, and on existing and simulated the kubeconfig holding it, so that it never acts on
// whatever cluster the user's kubectl points at.
func TestPrintedKubectlBound(t *testing.T) {
	layouts := securityLayouts(t)
	layouts["existing"] = workloadsRaw(t, map[string]string{"cloud": "existing"})
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range layouts {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		raw := layouts[name]
		t.Run(name, func(t *testing.T) {
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			_, outs := deployOutputs(t, raw)
			ctx := str(t, outs, stacks.KubeContextOutput)
			if ctx == "" {
				t.Fatal("empty kubeContext")
			}
			bound := "kubectl --context " + ctx + " "
			if !stacks.IsCloud(cfg.Cloud) {
				bound = "kubectl --kubeconfig " + bashQuote(cfg.Cluster.Kubeconfig) + " --context " + ctx + " "
			}
			commands := 0
			for _, k := range slices.Sorted(maps.Keys(outs)) {
				o := outs[k]
				s, ok := o.value.(string)
				if !ok || o.secret {
					continue
				}
				n := len(kubectlWord.FindAllStringIndex(s, -1))
				if n == 0 {
					continue
				}
				commands++
				if got := strings.Count(s, bound); got != n {
					t.Errorf("output %s: %d kubectl command(s), %d bound with %q:\n%s", k, n, got, bound, s)
				}
			}
			if commands < 3 {
				t.Errorf("only %d outputs with kubectl commands", commands)
			}
		})
	}
}

// TestLoadBalancerAddress: with entrypoint.serviceType LoadBalancer the outputs carry the address
// the cloud gave the Service entrypoint-public (its status.loadBalancer.ingress: an IP, or a
// hostname on AWS) and Jupyter's public URL; without one, neither.
func TestLoadBalancerAddress(t *testing.T) {
	raw := securityLayouts(t)["dev-options"]
	for _, tc := range []struct {
		name              string
		ingress           map[string]any
		wantAddr, wantURL string
	}{
		{"ip", nil, fakeLoadBalancerIP, "https://" + fakeLoadBalancerIP + "/lab"},
		{"hostname", map[string]any{"hostname": "a1b2.elb.us-east-1.amazonaws.com"}, "a1b2.elb.us-east-1.amazonaws.com", "https://a1b2.elb.us-east-1.amazonaws.com/lab"},
		{"ipv6", map[string]any{"ip": "2001:db8::7"}, "2001:db8::7", "https://[2001:db8::7]/lab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, outs := deployOutputsWith(t, raw, &recorder{Recorder: rendertest.Recorder{LBIngress: tc.ingress}})
			if got := str(t, outs, "jupyterPublicAddress"); got != tc.wantAddr {
				t.Errorf("jupyterPublicAddress %q, want %q", got, tc.wantAddr)
			}
			if got := str(t, outs, "jupyterPublicUrl"); got != tc.wantURL {
				t.Errorf("jupyterPublicUrl %q, want %q", got, tc.wantURL)
			}
			if got := str(t, outs, "jupyterPublicUrlCommand"); !strings.Contains(got, "get svc "+entrypoint.Name+"-public ") {
				t.Errorf("jupyterPublicUrlCommand %q does not read the Service %s-public", got, entrypoint.Name)
			}
		})
	}
	_, outs := deployOutputs(t, layoutRaw(t, 0)) // ClusterIP
	for _, k := range []string{"jupyterPublicAddress", "jupyterPublicUrl", "jupyterPublicUrlCommand"} {
		if _, ok := outs[k]; ok {
			t.Errorf("output %s without a LoadBalancer", k)
		}
	}
}

// TestOutputsReachAnyRank: the old `cluster.sh goto tower N` / `goto carrier N` reached any
// rank, and the TF charts' users followed `kubectl logs -f` on any task; the outputs do the same
// with one command per kind whose pod index (and TF task type) the user's shell fills in, `N=3
// eval "$(pulumi stack output gotoTowerN)"`, beside each set's count. So the outputs are the
// same in number and size whatever the number of ranks; there is also a shell in the
// scheduler's container (the old script's exec into the scheduler node).
func TestOutputsReachAnyRank(t *testing.T) {
	words := func(t *testing.T, env []string, command string) []string {
		t.Helper()
		cmd := exec.Command("bash", "-c", `eval "set -- $1"; printf '%s\n' "$@"`, "bash", command)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash: %v", err)
		}
		return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	}
	// after is what follows the stack's kubectl prefix (--kubeconfig, --context).
	after := func(ws []string) []string {
		for i, w := range ws {
			if w == "-n" {
				return ws[i:]
			}
		}
		return ws
	}
	type want struct {
		output string
		env    []string
		words  string
	}
	cases := []struct {
		name   string
		raw    stacks.Raw
		want   []want
		counts map[string]any
	}{
		{
			name: "dev", raw: layoutRaw(t, 0),
			want: []want{
				{"gotoTowerN", []string{"N=1"}, "-n kolotoc-dev exec -it tower-1 -c tower -- bash"},
				{"gotoTowerN", nil, "-n kolotoc-dev exec -it tower-0 -c tower -- bash"},
				{"towerLogsN", []string{"N=1"}, "-n kolotoc-dev logs -f tower-1 -c tower"},
				{"gotoCarrierN", []string{"N=0"}, "-n kolotoc-dev exec -it carrier-0 -c dask-worker -- bash"},
				{"carrierLogsN", []string{"N=0"}, "-n kolotoc-dev logs -f carrier-0 -c dask-worker"},
				{"gotoEntrypoint", nil, "-n kolotoc-dev exec -it deploy/entrypoint -c dask-scheduler -- bash"},
			},
			counts: map[string]any{"towerCount": 2.0, "carrierCount": 1.0},
		},
		{
			name: "workloads", raw: workloadsRaw(t, nil),
			want: []want{
				{"gotoElasticN", []string{"N=1"}, "-n kolotoc-workloads exec -it elastic-1 -c worker -- bash"},
				{"elasticLogsN", []string{"N=1"}, "-n kolotoc-workloads logs -f elastic-1 -c worker"},
				{"tfTaskLogs", []string{"TASK=ps", "N=1"}, "-n kolotoc-workloads logs -f tf-ps-1 -c ps"},
				{"tfTaskLogs", []string{"TASK=evaluator"}, "-n kolotoc-workloads logs -f tf-evaluator-0 -c evaluator"},
				{"tfTaskLogs", nil, "-n kolotoc-workloads logs -f tf-worker-0 -c worker"},
				{"gotoTfTask", []string{"TASK=chief"}, "-n kolotoc-workloads exec -it tf-chief-0 -c chief -- bash"},
			},
			counts: map[string]any{"elasticNodes": 2.0, "tfTaskCounts": map[string]any{"chief": 1.0, "evaluator": 1.0, "ps": 2.0, "worker": 2.0}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, outs := deployOutputs(t, tc.raw)
			for _, w := range tc.want {
				got := after(words(t, w.env, str(t, outs, w.output)))
				if !slices.Equal(got, strings.Fields(w.words)) {
					t.Errorf("%s with %v is %q to bash, want %q", w.output, w.env, got, w.words)
				}
			}
			for k, v := range tc.counts {
				o, ok := outs[k]
				if !ok {
					t.Errorf("output %s missing", k)
					continue
				}
				if fmt.Sprint(o.value) != fmt.Sprint(v) {
					t.Errorf("output %s = %v, want %v", k, o.value, v)
				}
			}
		})
	}
	// The same outputs, of the same size, for 2 towers and for 16 (and 1 carrier and 12; towerCount and carrierCount aside, whose digits grow).
	size := func(towers, carriers int) (int, int) {
		raw := layoutRaw(t, 1)
		raw.Values["kolotoc:towers"] = fmt.Sprintf(`{"count":%d,"gpusPerTower":1}`, towers)
		raw.Values["kolotoc:carriers"] = fmt.Sprintf(`{"count":%d}`, carriers)
		_, outs := deployOutputs(t, raw)
		n := 0
		for k, o := range outs {
			if k != "towerCount" && k != "carrierCount" && k != "towerHostnamePattern" {
				n += len(fmt.Sprint(o.value))
			}
		}
		return len(outs), n
	}
	k1, n1 := size(2, 1)
	k2, n2 := size(16, 12)
	if k1 != k2 || n1 != n2 {
		t.Errorf("outputs grow with the ranks: %d outputs of %d bytes for 2 towers, %d of %d for 16", k1, n1, k2, n2)
	}
}
