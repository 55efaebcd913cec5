package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"kolotoc/stacks"
)

// runsRaw is the workloads layout with towers beside elastic and TF, each run releasing its
// GPUs on success, code cloned from a repository and variables on every workload.
func runsRaw(t *testing.T, overrides map[string]string) stacks.Raw {
	t.Helper()
	env := `[{"name":"WANDB_PROJECT","value":"kolotoc"},{"name":"HF_TOKEN","valueFrom":{"secretKeyRef":{"name":"hf","key":"token"}}}]`
	set := map[string]string{
		"towers":     `{"count":2,"gpusPerTower":8,"pool":"gpu","run":"r2","onSuccess":"release","env":` + env + `}`,
		"sentinels":  `{"enabled":false}`,
		"carriers":   `{"count":1,"pool":"cpu","env":` + env + `}`,
		"elastic":    `{"enabled":true,"minNodes":1,"maxNodes":2,"gpusPerNode":8,"rdzvBackend":"etcd-v2","onSuccess":"release","env":` + env + `}`,
		"tfcluster":  `{"enabled":true,"ps":{"count":2},"workers":{"count":2,"gpus":4},"onSuccess":"release","env":` + env + `}`,
		"entrypoint": `{"env":` + env + `}`,
		"code":       `{"repository":"https://git.example.com/team/train.git","ref":"v1.2","credentialsSecret":"git-token"}`,
		"sshKeySeed": testSeed,
	}
	for k, v := range overrides {
		set[k] = v
	}
	raw := workloadsRaw(t, set)
	raw.Secrets["kolotoc:sshKeySeed"] = true
	return raw
}

// TestRuns checks what a run is made of: the run id on the launcher's pods (a new id replaces the
// launcher, nothing else), the right to release each run's StatefulSets and nothing more, and the
// release wired into each workload's entry script.
func TestRuns(t *testing.T) {
	rec := deploy(t, runsRaw(t, nil))

	launcher := templateOf(t, rec.one(t, tJob, "towers-launcher"))
	if got := launcher.Labels["kolotoc.dev/run"]; got != "r2" {
		t.Errorf("launcher pods labelled run %v, want r2", got)
	}
	pod := launcher.Spec
	if pod.ServiceAccountName != "launcher-release" || !holdsReleaseToken(pod, "launcher") {
		t.Errorf("launcher: service account %v, release token in the launcher container %v; want launcher-release with its token",
			pod.ServiceAccountName, holdsReleaseToken(pod, "launcher"))
	}
	env := envStrings(pod.Containers[0])
	for k, want := range map[string]string{"KOLOTOC_RUN": "r2", "KOLOTOC_ON_SUCCESS": "release", "KOLOTOC_RELEASE": "tower"} {
		if env[k] != want {
			t.Errorf("launcher env %s = %q, want %q", k, env[k], want)
		}
	}
	towers := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, "towers"))
	if towers.Annotations["kolotoc.dev/run"] != "r2" {
		t.Errorf("towers not annotated with the run: a new run would not bring released towers back")
	}
	if towers.Annotations["pulumi.com/patchForce"] != "true" {
		t.Errorf("towers without patchForce: the update after a release would conflict with the launcher's scale")
	}
	if _, ok := towers.Spec.Template.Labels["kolotoc.dev/run"]; ok {
		t.Errorf("the run id is on the towers' pod template: a new run would restart every tower")
	}

	// Each releaser may patch the scale of its own StatefulSets, nothing else.
	for role, want := range map[string][]string{
		"launcher-release":   {"tower"},
		"elastic-release":    {"elastic"},
		"tf-scripts-release": {"tf-chief", "tf-evaluator", "tf-ps", "tf-worker"},
	} {
		rules := decode[rbacv1.Role](t, rec.one(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", role)).Rules
		if len(rules) != 1 {
			t.Fatalf("role %s: %d rules, want 1", role, len(rules))
		}
		names := slices.Sorted(slices.Values(rules[0].ResourceNames))
		if fmt.Sprint(rules[0].Resources) != "[statefulsets/scale]" || fmt.Sprint(rules[0].Verbs) != "[patch]" ||
			fmt.Sprint(rules[0].APIGroups) != "[apps]" || !slices.Equal(names, want) {
			t.Errorf("role %s: %+v, want patch of statefulsets/scale of %v only", role, rules[0], want)
		}
		b := decode[rbacv1.RoleBinding](t, rec.one(t, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", role))
		if b.RoleRef.Name != role || len(b.Subjects) == 0 || b.Subjects[0].Name != role {
			t.Errorf("binding %s: %+v", role, b)
		}
	}
	// Only the chief of the TF tasks holds the token, in its TensorFlow container only.
	for _, name := range []string{"tfcluster-chief", "tfcluster-worker", "tfcluster-ps", "tfcluster-evaluator"} {
		spec := templateOf(t, rec.one(t, tStatefulSet, name)).Spec
		if token := holdsReleaseToken(spec, "chief"); token != (name == "tfcluster-chief") {
			t.Errorf("%s: release token mounted = %v", name, token)
		}
	}

	// The release is in every entry script, run only after success.
	for cm, script := range map[string]string{"towers-scripts": "launcher.sh", "elastic-scripts": "torchrun.sh", "tfcluster-scripts": "tf_config.sh"} {
		data := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, cm)).Data
		s := data[script]
		if !strings.Contains(s, "release.py") || !strings.Contains(s, `if [ "$status" = 0 ]`) {
			t.Errorf("%s/%s does not release on success:\n%s", cm, script, s)
		}
		if r := data["release.py"]; !strings.Contains(r, "statefulsets/{name}/scale") {
			t.Errorf("%s has no release.py", cm)
		}
	}
}

// TestRunKeepIsTheDefault: without onSuccess, nothing can scale anything and no pod gets a token.
func TestRunKeepIsTheDefault(t *testing.T) {
	rec := deploy(t, runsRaw(t, map[string]string{
		"towers":    `{"count":2,"gpusPerTower":8,"pool":"gpu","run":"r1"}`,
		"elastic":   `{"enabled":true,"minNodes":1,"maxNodes":2,"gpusPerNode":8,"rdzvBackend":"etcd-v2"}`,
		"tfcluster": `{"enabled":true,"ps":{"count":2},"workers":{"count":2,"gpus":4}}`,
	}))
	for _, token := range []string{"kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:core/v1:ServiceAccount"} {
		for _, r := range rec.ofType(token) {
			if strings.HasSuffix(r.Name, "-release") {
				t.Errorf("%s %s registered without onSuccess release", token, r.Name)
			}
		}
	}
	towers := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, "towers"))
	if _, ok := towers.Annotations["kolotoc.dev/run"]; ok {
		t.Errorf("kept towers annotated with the run: a new run would update them for nothing")
	}
	if !isFalse(templateOf(t, rec.one(t, tJob, "towers-launcher")).Spec.AutomountServiceAccountToken) {
		t.Errorf("launcher mounts a token without onSuccess release")
	}
}

// TestSuspend: kolotoc:suspend scales every GPU workload to zero and suspends the launcher;
// nothing else changes, so that resuming brings back exactly what was there.
func TestSuspend(t *testing.T) {
	running := deploy(t, runsRaw(t, nil))
	raw := runsRaw(t, map[string]string{"suspend": "true"})
	suspended := deploy(t, raw)
	if !isTrue(decode[batchv1.Job](t, suspended.one(t, tJob, "towers-launcher")).Spec.Suspend) {
		t.Errorf("launcher not suspended")
	}
	if decode[batchv1.Job](t, running.one(t, tJob, "towers-launcher")).Spec.Suspend != nil {
		t.Errorf("a running stack's launcher carries spec.suspend")
	}
	gpuHolders := map[string]bool{"towers": true, "elastic": true, "tfcluster-chief": true, "tfcluster-worker": true,
		"tfcluster-ps": true, "tfcluster-evaluator": true}
	for _, r := range suspended.ofType(tStatefulSet) {
		sus := decode[appsv1.StatefulSet](t, r)
		replicas := sus.Spec.Replicas
		if gpuHolders[r.Name] != (replicas != nil && *replicas == 0) {
			t.Errorf("suspended %s: replicas %v", r.Name, replicas)
		}
		// Apart from replicas (and the launcher's suspend), the suspended stack is the running one.
		run := decode[appsv1.StatefulSet](t, running.one(t, tStatefulSet, r.Name))
		if !cmp.Equal(run.Spec.Template, sus.Spec.Template) {
			t.Errorf("suspending changes %s's pod template: resuming would restart it", r.Name)
		}
	}
	if len(suspended.sorted()) != len(running.sorted()) {
		t.Errorf("suspend registers %d resources, running %d: suspend must only scale", len(suspended.sorted()), len(running.sorted()))
	}
}

// TestCodeAndEnv: the repository is cloned into every training pod and mounted in every
// container that runs code; every workload gets its variables, secret ones by reference only.
func TestCodeAndEnv(t *testing.T) {
	rec := deploy(t, runsRaw(t, nil))
	for _, p := range podTemplates(t, rec) {
		training := map[string]bool{"tower": true, "launcher": true, "carrier": true, "elastic": true,
			"tf-chief": true, "tf-worker": true, "tf-ps": true, "tf-evaluator": true}[p.component]
		var clone *corev1.Container
		for _, c := range p.spec.InitContainers {
			if c.Name == "code" {
				clone = &c
			}
		}
		if (clone != nil) != training {
			t.Errorf("%s: code clone present = %v", p.owner, clone != nil)
			continue
		}
		if clone == nil {
			continue
		}
		env := envStrings(*clone)
		if env["KOLOTOC_CODE_REPOSITORY"] != "https://git.example.com/team/train.git" || env["KOLOTOC_CODE_REF"] != "v1.2" ||
			env["GIT_PASSWORD"] != "secret git-token/password" {
			t.Errorf("%s: clone env %v", p.owner, env)
		}
		if clone.SecurityContext == nil || !isTrue(clone.SecurityContext.RunAsNonRoot) {
			t.Errorf("%s: the clone runs as root", p.owner)
		}
		for _, c := range p.spec.Containers {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/code" }) {
				t.Errorf("%s container %v: no /code mount", p.owner, c.Name)
			}
			env := envStrings(c)
			if env["WANDB_PROJECT"] != "kolotoc" || env["HF_TOKEN"] != "secret hf/token" || env["KOLOTOC_CODE_DIR"] != "/code" {
				t.Errorf("%s container %v: env %v", p.owner, c.Name, env)
			}
		}
	}
	jupyter := envStrings(containerNamed(t, templateOf(t, rec.one(t, tDeployment, "entrypoint")).Spec, "jupyterlab"))
	if jupyter["WANDB_PROJECT"] != "kolotoc" || jupyter["HF_TOKEN"] != "secret hf/token" {
		t.Errorf("Jupyter env %v", jupyter)
	}
}

// envStrings maps a container's variables to their values, "secret <name>/<key>" for references.
func envStrings(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = fmt.Sprintf("secret %v/%v", e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		default:
			out[e.Name] = fmt.Sprintf("%+v", *e.ValueFrom)
		}
	}
	return out
}

// TestTowerCountKeepsThePodTemplate: a new towers.count is an in-place scale. Anything in the
// towers' pod template that depends on the count (as KOLOTOC_NP once did) makes it a new template,
// which replaces the whole ring (meta.PodSpec).
func TestTowerCountKeepsThePodTemplate(t *testing.T) {
	template := func(count int) corev1.PodTemplateSpec {
		rec := deploy(t, runsRaw(t, map[string]string{
			"towers": fmt.Sprintf(`{"count":%d,"gpusPerTower":4,"pool":"gpu","run":"r1","env":[{"name":"A","value":"1"}]}`, count),
		}))
		return templateOf(t, rec.one(t, tStatefulSet, "towers"))
	}
	if d := cmp.Diff(template(2), template(3)); d != "" {
		t.Errorf("towers.count 2 → 3 changes the towers' pod template (-2 +3):\n%s", d)
	}
}

// holdsReleaseToken: the pod's automount is off and its container named container mounts the
// release account's token (meta.ReleaseTokenVolume); its other containers are checked by the
// components' own tests (rendertest.ReleaseToken).
func holdsReleaseToken(pod corev1.PodSpec, container string) bool {
	if !isFalse(pod.AutomountServiceAccountToken) {
		return false
	}
	for _, c := range pod.Containers {
		if c.Name != container {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "release-token" {
				return true
			}
		}
	}
	return false
}
