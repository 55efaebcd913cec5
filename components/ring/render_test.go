package ring

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// testArgs are the ring's Args as the stack builds them (stacks/workloads/towers.Args) for a dev stack on
// testPools (towers on the first GPU pool, v100, 4 GPUs each; the launcher on the CPU pool), with
// the seed of sshkey_test.go, then change applied to its config before the defaults are filled.
func testArgs(change func(c *Config)) *Args {
	c := NewConfig()
	c.LauncherPool = "cpu" // the stack fills it from the entrypoint's pool
	if change != nil {
		change(&c)
	}
	c.DefaultPools(testPools)
	c.Default()
	return &Args{
		Config: c, Site: rendertest.Site(), Name: Name, LauncherName: LauncherName,
		WaitSeconds: 600,
		SSHKeySeed:  pulumi.ToSecret(pulumi.String(testSeed)).(pulumi.StringOutput),
		KeyBinding:  Binding{Project: rendertest.Project, Stack: rendertest.Stack, Namespace: "kolotoc-dev"},
	}
}

func render(t *testing.T, a *Args) *rendertest.Recorder {
	t.Helper()
	return rendertest.Render(t, "towers", a, New)
}

// TestRenderGolden snapshots what the ring registers for two GPU towers, and checks that neither
// the seed nor the private key it derives reaches the inputs in plain text.
func TestRenderGolden(t *testing.T) {
	got := rendertest.GoldenYAML(t, render(t, testArgs(nil)))
	rendertest.CompareGolden(t, filepath.Join("testdata", "towers.golden.yaml"), got)
	priv, _, err := DeriveSSHKey(testSeed, Binding{Project: rendertest.Project, Stack: rendertest.Stack, Namespace: "kolotoc-dev"})
	if err != nil {
		t.Fatal(err)
	}
	rendertest.NoSecretIn(t, got, testSeed, priv[40:100]) // a line of the key's body
}

// TestRenderFacts checks what users rely on in the rendered ring.
func TestRenderFacts(t *testing.T) {
	statefulSet := func(rec *rendertest.Recorder) any {
		return rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "towers"))
	}
	launcher := func(rec *rendertest.Recorder) any {
		return rendertest.Inputs(rec.One(t, "kubernetes:batch/v1:Job", "towers-launcher"))
	}
	t.Run("replicas are the count, none when suspended", func(t *testing.T) {
		for _, tc := range []struct {
			count   int
			suspend bool
			want    float64
		}{{2, false, 2}, {5, false, 5}, {5, true, 0}} {
			a := testArgs(func(c *Config) { c.Count = tc.count })
			a.Suspend = tc.suspend
			got := rendertest.Get(statefulSet(render(t, a)), "spec", "replicas")
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("count %d, suspend %v: replicas (-want +got):\n%s", tc.count, tc.suspend, d)
			}
		}
	})
	t.Run("GPU towers tolerate the GPU taint and request GPUs, CPU towers neither", func(t *testing.T) {
		for _, tc := range []struct {
			pool        string
			tolerations any
			gpuLimit    any
		}{
			{"v100", []any{map[string]any{"key": meta.GPUTaintKey, "operator": "Equal", "value": meta.GPUTaintValue, "effect": meta.GPUTaintEffect}}, "4"},
			{"cpu", nil, nil},
		} {
			sts := statefulSet(render(t, testArgs(func(c *Config) { c.Pool = tc.pool })))
			pod := rendertest.Get(sts, "spec", "template", "spec")
			if d := cmp.Diff(tc.tolerations, rendertest.Get(pod, "tolerations")); d != "" {
				t.Errorf("pool %s: tolerations (-want +got):\n%s", tc.pool, d)
			}
			if d := cmp.Diff(tc.gpuLimit, rendertest.Get(pod, "containers", "[0]", "resources", "limits", meta.GPUResource)); d != "" {
				t.Errorf("pool %s: GPU limit (-want +got):\n%s", tc.pool, d)
			}
		}
	})
	t.Run("a new count starts a new launcher, the same count keeps it", func(t *testing.T) {
		annotation := func(count int) any {
			job := launcher(render(t, testArgs(func(c *Config) { c.Count = count })))
			return rendertest.Get(job, "spec", "template", "metadata", "annotations", "kolotoc.dev/hostfile-sha256")
		}
		two, twoAgain, three := annotation(2), annotation(2), annotation(3)
		if two == nil || two == "" {
			t.Fatal("the launcher's pod template has no hostfile hash")
		}
		if d := cmp.Diff(two, twoAgain); d != "" {
			t.Errorf("the same towers give another launcher (-first +second):\n%s", d)
		}
		if two == three {
			t.Errorf("2 and 3 towers give the same launcher pod template (%v): a new ring would keep the old hostfile's launcher", two)
		}
	})
}

// TestReleaseOnlyToZero: with onSuccess release the launcher's account may scale the towers, and
// an admission policy the API server enforces lets it ask for 0 replicas only (Kubernetes,
// "Validating Admission Policy"; the e2e suite checks the API server's refusal).
func TestReleaseOnlyToZero(t *testing.T) {
	rec := render(t, testArgs(func(c *Config) { c.OnSuccess = meta.OnSuccessRelease }))
	policy := rendertest.Inputs(rec.One(t, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", "launcher-release-zero-only"))
	spec := rendertest.Get(policy, "spec")
	if got := rendertest.Get(spec, "matchConditions", "[0]", "expression"); got != "request.userInfo.username == 'system:serviceaccount:kolotoc-dev:launcher-release'" {
		t.Errorf("the policy judges %v, want the launcher's release account only", got)
	}
	rule := rendertest.Get(spec, "matchConstraints", "resourceRules", "[0]")
	if rendertest.Get(rule, "resources", "[0]") != "statefulsets/scale" || rendertest.Get(rule, "operations", "[0]") != "UPDATE" {
		t.Errorf("the policy matches %v, want updates of statefulsets/scale", rule)
	}
	if v := rendertest.Get(spec, "validations", "[0]"); rendertest.Get(v, "expression") != meta.ReleaseExpression || rendertest.Get(spec, "failurePolicy") != "Fail" {
		t.Errorf("the policy validates %v (failurePolicy %v), want replicas == 0, failing closed", v, rendertest.Get(spec, "failurePolicy"))
	}
	binding := rendertest.Inputs(rec.One(t, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding", "launcher-release-zero-only"))
	if rendertest.Get(binding, "spec", "policyName") != "kolotoc-kolotoc-dev-launcher-release" ||
		rendertest.Get(binding, "spec", "validationActions", "[0]") != "Deny" ||
		rendertest.Get(binding, "spec", "matchResources", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name") != "kolotoc-dev" {
		t.Errorf("policy binding %v, want Deny in the stack's namespace", binding)
	}
	// The launcher waits for the policy: no token exists before the rule that bounds it.
	launcher := rec.One(t, "kubernetes:batch/v1:Job", "towers-launcher")
	for _, dep := range []string{"launcher-release-zero-only"} {
		found := false
		for _, d := range launcher.DependsOn {
			found = found || d == dep
		}
		if !found {
			t.Errorf("the launcher does not wait for %s (depends on %v)", dep, launcher.DependsOn)
		}
	}
}

// TestReleaseTokenOnlyInTheLauncherContainer: the release account's token is mounted into the
// launcher container alone, through a projected volume; the pod's automount stays off, so the code
// clone that runs before it (an init container running git against a remote) never holds it.
func TestReleaseTokenOnlyInTheLauncherContainer(t *testing.T) {
	a := testArgs(func(c *Config) { c.OnSuccess = meta.OnSuccessRelease })
	a.Site.Code = &meta.Code{Repository: "https://example.com/team/train.git", Ref: "main", Path: "/code", Image: "kolotoc/git:1"}
	pod := rendertest.Get(rendertest.Inputs(render(t, a).One(t, "kubernetes:batch/v1:Job", "towers-launcher")), "spec", "template", "spec")
	if inits, _ := rendertest.Get(pod, "initContainers").([]any); len(inits) == 0 {
		t.Fatal("no init container: the code clone is missing from the test")
	}
	rendertest.ReleaseToken(t, pod, "launcher-release", "launcher")
	// Without release, the launcher's own account's token (it may patch the run's state only),
	// in the launcher container alone too.
	pod = rendertest.Get(rendertest.Inputs(render(t, testArgs(nil)).One(t, "kubernetes:batch/v1:Job", "towers-launcher")), "spec", "template", "spec")
	rendertest.ReleaseToken(t, pod, "launcher", "launcher")
	// The towers never hold one.
	towers := rendertest.Get(rendertest.Inputs(render(t, a).One(t, "kubernetes:apps/v1:StatefulSet", "towers")), "spec", "template", "spec")
	rendertest.ReleaseToken(t, towers, "", "")
}

// TestTowerReadinessSoonAfterStart: `pulumi up` waits for the towers' StatefulSet, and a tower is
// Ready once a probe of its sshd passes. The kubelet probes a starting container once, and then
// once a period (pkg/kubelet/prober/worker.go, run; the entrypoint's TestReadinessSoonAfterStart
// cites the rest): a probe that came before sshd listened cost a whole period, 5 s with the
// former one, in 2 of 10 measured ups of dev (docs/measured.md). The tower's probe runs at most
// every 2 s, and a tower turns unready after no less than 15 s of failures, as before.
func TestTowerReadinessSoonAfterStart(t *testing.T) {
	s := rendertest.Decode[appsv1.StatefulSet](t, render(t, testArgs(nil)).One(t, "kubernetes:apps/v1:StatefulSet", "towers"))
	var tower *corev1.Container
	for i, c := range s.Spec.Template.Spec.Containers {
		if c.Name == Name {
			tower = &s.Spec.Template.Spec.Containers[i]
		}
	}
	if tower == nil || tower.ReadinessProbe == nil {
		t.Fatalf("no tower container with a readiness probe: %+v", s.Spec.Template.Spec.Containers)
	}
	p := tower.ReadinessProbe
	if p.PeriodSeconds < 1 || p.PeriodSeconds > 2 {
		t.Errorf("readiness periodSeconds %d; want 1 or 2 (0 is Kubernetes' 10)", p.PeriodSeconds)
	}
	if got := max(p.PeriodSeconds, 1) * max(p.FailureThreshold, 3); got < 15 {
		t.Errorf("unready after %d s of failed probes; want 15 s or more", got)
	}
}

// TestRestartsRender checks what the restarts rely on in the rendered ring: the launcher's Job
// fails at once on runFailedExit and ignores its own pod's disruptions (Kubernetes, "Handling
// retriable and non-retriable pod failures with Pod failure policy": rules evaluated in order,
// Ignore does not count towards backoffLimit, FailJob fails the Job); its environment carries the
// contract and the restarts; both pods get the grace period; the towers' budget lets a drain
// evict one tower when the run restarts, none when it cannot; the state ConfigMap's Role may
// get and patch that ConfigMap alone, bound to the launcher's account.
func TestRestartsRender(t *testing.T) {
	a := testArgs(nil)
	a.CheckpointDir = "/shared/checkpoints/towers/default"
	rec := render(t, a)
	job := rendertest.Decode[batchv1.Job](t, rec.One(t, "kubernetes:batch/v1:Job", "towers-launcher"))
	rules := job.Spec.PodFailurePolicy.Rules
	if len(rules) != 2 || rules[0].Action != batchv1.PodFailurePolicyActionIgnore || rules[0].OnPodConditions[0].Type != corev1.DisruptionTarget ||
		rules[1].Action != batchv1.PodFailurePolicyActionFailJob || rules[1].OnExitCodes == nil ||
		*rules[1].OnExitCodes.ContainerName != LauncherName || rules[1].OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn ||
		!slices.Equal(rules[1].OnExitCodes.Values, []int32{runFailedExit}) {
		t.Errorf("pod failure policy %+v: want Ignore on DisruptionTarget, then FailJob on the launcher's exit %d", job.Spec.PodFailurePolicy, runFailedExit)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e
	}
	for k, v := range map[string]string{meta.CheckpointDirEnv: "/shared/checkpoints/towers/default", meta.RunIDEnv: meta.DefaultRunID,
		"KOLOTOC_MAX_RESTARTS": "3", "KOLOTOC_STATE": "launcher-state"} {
		if env[k].Value != v {
			t.Errorf("launcher env %s = %q, want %q", k, env[k].Value, v)
		}
	}
	if f := env["KOLOTOC_LAUNCHER_UID"].ValueFrom; f == nil || f.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/controller-uid']" {
		t.Errorf("KOLOTOC_LAUNCHER_UID: %+v, want the Job's uid from its pod's label", env["KOLOTOC_LAUNCHER_UID"])
	}
	sts := rendertest.Decode[appsv1.StatefulSet](t, rec.One(t, "kubernetes:apps/v1:StatefulSet", "towers"))
	for what, g := range map[string]*int64{"towers": sts.Spec.Template.Spec.TerminationGracePeriodSeconds, "launcher": job.Spec.Template.Spec.TerminationGracePeriodSeconds} {
		if g == nil || *g != meta.DefaultTerminationGraceSeconds {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want %d", what, g, meta.DefaultTerminationGraceSeconds)
		}
	}
	for _, tc := range []struct{ restarts, want int }{{3, 1}, {0, 0}} {
		pdb := rendertest.Inputs(render(t, testArgs(func(c *Config) { c.MaxRestarts = tc.restarts })).One(t, "kubernetes:policy/v1:PodDisruptionBudget", "towers"))
		if got := rendertest.Get(pdb, "spec", "maxUnavailable"); got != float64(tc.want) {
			t.Errorf("maxRestarts %d: the towers' budget allows %v unavailable, want %d", tc.restarts, got, tc.want)
		}
	}
	role := rendertest.Inputs(rec.One(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", "towers-state"))
	want := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"launcher-state"}, "verbs": []any{"get", "patch"}}}
	if d := cmp.Diff(want, rendertest.Get(role, "rules")); d != "" {
		t.Errorf("state Role rules (-want +got):\n%s", d)
	}
	binding := rendertest.Inputs(rec.One(t, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "towers-state"))
	if got := rendertest.Get(binding, "subjects", "[0]", "name"); got != "launcher" || job.Spec.Template.Spec.ServiceAccountName != "launcher" {
		t.Errorf("the state Role is bound to %v, the launcher runs as %q; want both launcher", got, job.Spec.Template.Spec.ServiceAccountName)
	}
	rel := render(t, testArgs(func(c *Config) { c.OnSuccess = meta.OnSuccessRelease }))
	if got := rendertest.Get(rendertest.Inputs(rel.One(t, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "towers-state")), "subjects", "[0]", "name"); got != "launcher-release" {
		t.Errorf("releasing, the state Role is bound to %v, want launcher-release (the launcher's account then)", got)
	}
}

// TestQueuedRingRender: queued, the towers' StatefulSet itself names the queue and the priority
// (Kueue's StatefulSet integration admits it as one unit, meta.SetGang), its pods carry no plain
// pod-group keys (a plain group cannot take back a tower re-created under its old name), it is
// replaced on any change of its spec or annotations and deleted in the background; the launcher
// is not queued and waits for its towers without a deadline. Unqueued, none of it.
func TestQueuedRingRender(t *testing.T) {
	a := testArgs(func(c *Config) { c.Run = "r2" })
	a.Queue = &meta.SetGang{Queue: "kolotoc", Priority: "kolotoc-dev-towers"}
	rec := render(t, a)
	res := rec.One(t, "kubernetes:apps/v1:StatefulSet", "towers")
	sts := rendertest.Decode[appsv1.StatefulSet](t, res)
	want := map[string]string{meta.QueueNameLabel: "kolotoc", meta.WorkloadPriorityClassLabel: "kolotoc-dev-towers"}
	for k, v := range want {
		if sts.Labels[k] != v || sts.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: StatefulSet %q, pods %q; want %q on both", k, sts.Labels[k], sts.Spec.Template.Labels[k], v)
		}
	}
	for _, k := range []string{meta.PodGroupNameLabel, meta.PodGroupTotalCountKey, meta.PodGroupRetriableKey, meta.PodGroupServingKey} {
		if _, ok := sts.Spec.Template.Labels[k]; ok {
			t.Errorf("the towers' pods carry the plain pod-group label %s", k)
		}
		if _, ok := sts.Spec.Template.Annotations[k]; ok {
			t.Errorf("the towers' pods carry the plain pod-group annotation %s", k)
		}
	}
	if !res.DeleteBeforeReplace || !slices.Equal(res.ReplaceOnChanges, meta.QueuedSetReplaceOn) {
		t.Errorf("queued towers: deleteBeforeReplace %v, replaceOnChanges %v; want true and %v", res.DeleteBeforeReplace, res.ReplaceOnChanges, meta.QueuedSetReplaceOn)
	}
	if p := sts.Annotations["pulumi.com/deletionPropagationPolicy"]; p != "background" {
		t.Errorf("queued towers deleted with propagation %q, want background", p)
	}
	job := rendertest.Decode[batchv1.Job](t, rec.One(t, "kubernetes:batch/v1:Job", "towers-launcher"))
	if _, ok := job.Spec.Template.Labels[meta.QueueNameLabel]; ok {
		t.Errorf("the launcher's pod names a queue: %v", job.Spec.Template.Labels)
	}
	queuedEnv := func(j batchv1.Job) string {
		for _, e := range j.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "KOLOTOC_QUEUED" {
				return e.Value
			}
		}
		return ""
	}
	if v := queuedEnv(job); v != "true" {
		t.Errorf("queued launcher: KOLOTOC_QUEUED=%q, want true", v)
	}

	plain := render(t, testArgs(nil))
	res = plain.One(t, "kubernetes:apps/v1:StatefulSet", "towers")
	sts = rendertest.Decode[appsv1.StatefulSet](t, res)
	if _, ok := sts.Labels[meta.QueueNameLabel]; ok || !slices.Equal(res.ReplaceOnChanges, append(append([]string{}, meta.PodSpec...), meta.QueueLabelPath)) ||
		sts.Annotations["pulumi.com/deletionPropagationPolicy"] != "" {
		t.Errorf("unqueued towers: labels %v, replaceOnChanges %v, annotations %v; want no queue, the pod spec and the queue label, default propagation",
			sts.Labels, res.ReplaceOnChanges, sts.Annotations)
	}
	if v := queuedEnv(rendertest.Decode[batchv1.Job](t, plain.One(t, "kubernetes:batch/v1:Job", "towers-launcher"))); v != "false" {
		t.Errorf("unqueued launcher: KOLOTOC_QUEUED=%q, want false", v)
	}
}
