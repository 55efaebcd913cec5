package tests

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kolotoc/components/meta/rendertest"
	"kolotoc/stacks"
	entrypointwl "kolotoc/stacks/workloads/entrypoint"
)

// Private images (issue 11): a pull Secret from secret config in every namespace with Kolotoc
// pods, named by every pod; the GKE node account and the AKS kubelet identity read the
// registries of their clouds; EKS nodes read ECR through their role.

const (
	registryToken = "ghp-registry-token-that-must-stay-secret"
	registryKey   = "gcp-json-key-that-must-stay-secret"
	pullSecret    = "registry-credentials"
	exampleACR    = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-images/providers/Microsoft.ContainerRegistry/registries/mlimages"
)

// withRegistries adds two private registries and their passwords (a secret) to a stack's config.
func withRegistries(raw stacks.Raw) stacks.Raw {
	raw.Values["kolotoc:registries"] = `[{"server":"ghcr.io","username":"ml-bot"},{"server":"europe-docker.pkg.dev","username":"_json_key"}]`
	raw.Values["kolotoc:registryPasswords"] = fmt.Sprintf(`{"ghcr.io":%q,"europe-docker.pkg.dev":%q}`, registryToken, registryKey)
	raw.Secrets["kolotoc:registryPasswords"] = true
	return raw
}

// fullStacks are layouts with every workload Kolotoc renders a pod for: towers with sentinels and
// their launcher, carriers, the entrypoint, etcd, elastic workers, every TensorFlow task type and
// its own TensorBoard, Prometheus, Grafana and the DCGM exporter, the device plugin and the
// in-cluster NFS server; and the cloud stacks.
func fullStacks(t *testing.T) map[string]stacks.Raw {
	t.Helper()
	all := func(entrypoint string) stacks.Raw {
		raw := workloadsRaw(t, map[string]string{
			"towers":       `{"count":2,"gpusPerTower":8,"pool":"gpu","launcherPool":"cpu"}`,
			"sentinels":    `{"enabled":true}`,
			"entrypoint":   entrypoint,
			"devicePlugin": `{"enabled":true}`,
			"storage":      `{"type":"in-cluster-nfs"}`,
		})
		raw.Values["kolotoc:sshKeySeed"] = testSeed
		raw.Secrets["kolotoc:sshKeySeed"] = true
		return raw
	}
	out := map[string]stacks.Raw{
		"all workloads":                   all(`{"pool":"cpu"}`),
		"all workloads, tf's tensorboard": all(`{"pool":"cpu","tensorboard":false}`),
	}
	for _, s := range cloudStacks {
		out[s.name] = cloudRaw(t, s.name, nil)
	}
	for _, raw := range out {
		withRegistries(raw)
	}
	return out
}

// TestPullSecretOnEveryPod: every pod template the program registers names the pull Secret, which
// exists in the pod's namespace as a kubernetes.io/dockerconfigjson Secret whose data is secret;
// no password appears in plain text in anything registered.
func TestPullSecretOnEveryPod(t *testing.T) {
	for name, raw := range fullStacks(t) {
		t.Run(name, func(t *testing.T) {
			rec := deploy(t, raw)
			secrets := map[string]registered{} // namespace → its pull Secret
			for _, s := range rec.ofType(tSecret) {
				// Secrets are read by their metadata alone: their data is a secret, not a map.
				if md := rendertest.DecodeSome[metav1.PartialObjectMetadata](t, s); md.Name == pullSecret {
					secrets[md.Namespace] = s
				}
			}
			pods := podTemplates(t, rec)
			components := map[string]bool{}
			for _, p := range pods {
				components[p.component] = true
				if got := fmt.Sprint(p.spec.ImagePullSecrets); got != "[{"+pullSecret+"}]" {
					t.Errorf("%s (%s): imagePullSecrets %s, want [%s]", p.owner, p.component, got, pullSecret)
				}
				if _, ok := secrets[p.namespace]; !ok {
					t.Errorf("%s runs in %s, which has no %s", p.owner, p.namespace, pullSecret)
				}
			}
			if strings.HasPrefix(name, "all") {
				want := []string{"tower", "launcher", "carrier", "entrypoint", "etcd", "elastic", "tf-worker", "tf-ps",
					"tf-chief", "tf-evaluator", "prometheus", "grafana", "dcgm-exporter", "nvidia-device-plugin", "nfs-server"}
				if strings.Contains(name, "tensorboard") {
					want = append(want, "tf-tensorboard")
				}
				for _, c := range want {
					if !components[c] {
						t.Errorf("no pod of %s among %v: the layout does not cover every workload", c, slices.Sorted(maps.Keys(components)))
					}
				}
			}
			// Every pod-making resource waits for the pull Secret, itself or through its
			// component (its children are registered once the component is), or a first pull
			// would go without it.
			waitsFor := waitsForFunc(rec)
			for _, r := range rec.sorted() {
				switch r.Type {
				case tDeployment, tStatefulSet, tDaemonSet, tJob:
					if deps := waitsFor(r); !slices.Contains(deps, pullSecret) {
						t.Errorf("%s %s does not wait for %s (waits for %v)", r.Type, r.Name, pullSecret, deps)
					}
				}
			}
			for ns, s := range secrets {
				in := inputs(s)
				if get(in, "type") != "kubernetes.io/dockerconfigjson" {
					t.Errorf("%s in %s: type %v", pullSecret, ns, get(in, "type"))
				}
				data := s.Inputs["stringData"]
				if !isSecret(data) {
					t.Fatalf("%s in %s: its data is not a secret", pullSecret, ns)
				}
				checkDockerConfig(t, secretText(data))
			}
			for _, r := range rec.sorted() {
				if leak := findPlain(resource.NewProperty(r.Inputs), []string{registryToken, registryKey}); leak != "" {
					t.Errorf("%s %s: %q in plain text", r.Type, r.Name, leak)
				}
			}
		})
	}
}

// checkDockerConfig: the Secret's .dockerconfigjson holds each registry with its user and
// password, and the auth the kubelet sends.
func checkDockerConfig(t *testing.T, data string) {
	t.Helper()
	var sd map[string]string
	if err := json.Unmarshal([]byte(data), &sd); err != nil {
		t.Fatalf("stringData %v", err)
	}
	var cfg struct {
		Auths map[string]struct{ Username, Password, Auth string } `json:"auths"`
	}
	if err := json.Unmarshal([]byte(sd[".dockerconfigjson"]), &cfg); err != nil {
		t.Fatalf(".dockerconfigjson: %v", err)
	}
	for server, want := range map[string][2]string{"ghcr.io": {"ml-bot", registryToken}, "europe-docker.pkg.dev": {"_json_key", registryKey}} {
		a := cfg.Auths[server]
		if a.Username != want[0] || a.Password != want[1] || a.Auth == "" {
			t.Errorf("%s: user %q, password set %v, auth set %v", server, a.Username, a.Password == want[1], a.Auth != "")
		}
	}
	if len(cfg.Auths) != 2 {
		t.Errorf("%d registries in the Docker config, want 2", len(cfg.Auths))
	}
}

// TestNoPullSecretWithoutRegistries: a stack that names no registry renders no pull Secret and no
// imagePullSecrets (so existing stacks' pods do not change).
func TestNoPullSecretWithoutRegistries(t *testing.T) {
	rec := deploy(t, workloadsRaw(t, nil))
	for _, p := range podTemplates(t, rec) {
		if v := p.spec.ImagePullSecrets; v != nil {
			t.Errorf("%s: imagePullSecrets %v without registries", p.owner, v)
		}
	}
	for _, s := range rec.ofType(tSecret) {
		if get(inputs(s), "type") == "kubernetes.io/dockerconfigjson" {
			t.Errorf("pull Secret %s without registries", s.Name)
		}
	}
}

// TestRegistryOutputsHoldNoSecret: no stack output of a stack with registries carries a password.
func TestRegistryOutputsHoldNoSecret(t *testing.T) {
	raw := fullStacks(t)["all workloads"]
	cfg, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := stacks.LocalKubeAccess(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outs := stacks.StackOutputs(cfg, entrypointwl.Args(cfg), kube)
	for k, v := range stacks.WorkloadOutputs(cfg, kube) {
		outs[k] = v
	}
	for k, v := range stacks.RecordedIdentity(cfg, nil) {
		outs["storageIdentity."+k] = pulumi.String(v)
	}
	for k, o := range resolveOutputs(t, raw, outs) {
		if text := fmt.Sprint(o.value); strings.Contains(text, registryToken) || strings.Contains(text, registryKey) {
			t.Errorf("output %s carries a registry password", k)
		}
	}
}

// TestGKERegistryProjects: the node account reads Artifact Registry in its own project and in
// each cluster.registryProjects, with the registry role only.
func TestGKERegistryProjects(t *testing.T) {
	r := cloudRec(t, "prod", withCluster(t, "prod", map[string]any{"registryProjects": []string{"shared-images"}}))
	sa := inputs(r.one(t, tGCPAccount, "cluster-nodes"))
	member := "serviceAccount:" + get(sa, "accountId").(string) + "@test-project.iam.gserviceaccount.com"
	grants := map[string]string{}
	for _, m := range r.ofType(tGCPIAMMember) {
		in := inputs(m)
		if get(in, "role") == "roles/artifactregistry.reader" {
			if get(in, "member") != member {
				t.Errorf("%s grants registry read to %v, want the node account %s", m.Name, get(in, "member"), member)
			}
			grants[fmt.Sprint(get(in, "project"))] = m.Name
		}
	}
	if len(grants) != 2 || grants["test-project"] == "" || grants["shared-images"] == "" {
		t.Errorf("registry read in projects %v, want test-project and shared-images", grants)
	}
	for _, np := range r.ofType(tGKENodePool) {
		if !slices.Contains(np.DependsOn, grants["shared-images"]) {
			t.Errorf("node pool %s does not wait for the registry grant (depends on %v)", np.Name, np.DependsOn)
		}
	}
}

// TestAKSAttachACR: cluster.acrId gives the kubelet identity AcrPull on that registry alone; no
// ACR, no assignment.
func TestAKSAttachACR(t *testing.T) {
	r := cloudRec(t, "azure", withCluster(t, "azure", map[string]any{"acrId": exampleACR}))
	ra := inputs(r.one(t, tRoleAssign, "cluster-acr"))
	wantRole := "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/7f951dda-4ed3-4680-a7ca-43fe172d538d"
	if get(ra, "scope") != exampleACR || get(ra, "roleDefinitionId") != wantRole || get(ra, "principalId") != fakeKubeletObjectID ||
		get(ra, "principalType") != "ServicePrincipal" {
		t.Errorf("ACR assignment %v, want AcrPull on %s for the kubelet identity %s", ra, exampleACR, fakeKubeletObjectID)
	}
	for _, a := range cloudRec(t, "azure", nil).ofType(tRoleAssign) {
		if strings.Contains(fmt.Sprint(get(inputs(a), "roleDefinitionId")), "7f951dda") {
			t.Errorf("AcrPull %s without cluster.acrId", a.Name)
		}
	}
}

// TestEKSNodesReadECR: the EKS node role reads ECR (the managed read-only policy), so private ECR
// images need no pull Secret.
func TestEKSNodesReadECR(t *testing.T) {
	r := cloudRec(t, "aws", nil)
	for _, a := range r.ofType(tIAMAttachment) {
		if strings.HasPrefix(a.Name, "cluster-nodes-") && get(inputs(a), "policyArn") == "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly" {
			return
		}
	}
	t.Error("the node role lacks AmazonEC2ContainerRegistryReadOnly: private ECR images would not pull")
}
