package main

import (
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func secret(v any) map[string]any {
	b, _ := json.Marshal(v)
	return map[string]any{secretSigKey: secretSigValue, "plaintext": string(b)}
}

const certKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.1", certificate-authority-data: Q0E=}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZLVJFQUwtU0VDUkVU, token: TOKEN-REAL-SECRET}
`

const execKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: gke
  cluster: {server: "https://34.1.2.3", certificate-authority-data: Q0E=}
contexts:
- name: gke
  context: {cluster: gke, user: gke}
current-context: gke
users:
- name: gke
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: gke-gcloud-auth-plugin, provideClusterInfo: true}
`

func deployment(t *testing.T, stack string, kubeconfig string) []byte {
	t.Helper()
	root := "urn:pulumi:" + stack + "::kolotoc::pulumi:pulumi:Stack::kolotoc-" + stack
	prov := "urn:pulumi:" + stack + "::kolotoc::pulumi:providers:kubernetes::k8s"
	d := map[string]any{
		"version": 3,
		"deployment": map[string]any{
			"manifest":          map[string]any{"version": "v3.250.0"},
			"secrets_providers": map[string]any{"type": "passphrase", "state": map[string]any{"salt": "v1:STACK-SALT"}},
			"resources": []any{
				map[string]any{"urn": root, "type": "pulumi:pulumi:Stack", "custom": false,
					"outputs": map[string]any{"kubeconfig": secret(kubeconfig), "endpoint": "http://x", "count": 4}},
				map[string]any{"urn": prov, "id": "p1", "type": "pulumi:providers:kubernetes", "custom": true, "parent": root,
					"inputs": map[string]any{"kubeconfig": secret(kubeconfig), "clusterIdentifier": "kolotoc-" + stack}},
				map[string]any{"urn": "urn:pulumi:" + stack + "::kolotoc::kubernetes:core/v1:Secret::jupyter", "type": "kubernetes:core/v1:Secret",
					"custom": true, "parent": root, "provider": prov + "::p1", "dependencies": []any{prov},
					"inputs":  map[string]any{"stringData": secret(map[string]any{"password": "JUPYTER-REAL-SECRET"})},
					"outputs": map[string]any{"data": secret(map[string]any{"password": "SlVQWVRFUi1SRUFMLVNFQ1JFVA=="}), "replicas": 1.5}},
			},
			"pending_operations": []any{map[string]any{"type": "creating"}},
		},
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const target = `{"version":3,"deployment":{"manifest":{"version":"v3.250.0"},"secrets_providers":{"type":"passphrase","state":{"salt":"v1:COPY-SALT"}}}}`

func TestScrubReplacesEverySecretAndRenamesTheStack(t *testing.T) {
	out, rep, err := Scrub(deployment(t, "prod", certKubeconfig), []byte(target), "prod", "prod-preview")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, leak := range []string{"JUPYTER-REAL-SECRET", "SlVQWVRFUi1SRUFMLVNFQ1JFVA", "S0VZLVJFQUwtU0VDUkVU", "TOKEN-REAL-SECRET", "STACK-SALT", "creating"} {
		if strings.Contains(text, leak) {
			t.Errorf("the copy holds %q", leak)
		}
	}
	if !strings.Contains(text, "COPY-SALT") {
		t.Error("the copy's own secrets provider is missing")
	}
	if strings.Contains(text, "urn:pulumi:prod::") || strings.Contains(text, "Stack::kolotoc-prod\"") {
		t.Errorf("a URN still names the stack:\n%s", text)
	}
	for _, want := range []string{
		`"urn":"urn:pulumi:prod-preview::kolotoc::pulumi:pulumi:Stack::kolotoc-prod-preview"`,
		`"parent":"urn:pulumi:prod-preview::kolotoc::pulumi:pulumi:Stack::kolotoc-prod-preview"`,
		`"provider":"urn:pulumi:prod-preview::kolotoc::pulumi:providers:kubernetes::k8s::p1"`,
		`"clusterIdentifier":"kolotoc-prod"`, // a value, not a URN: the program still names the cluster so
		`"count":4`, `"replicas":1.5`,        // numbers as they were
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the copy lacks %s", want)
		}
	}
	if rep != (Report{Resources: 3, Secrets: 2, Kubeconfigs: 2, Pending: 1}) {
		t.Errorf("report %+v", rep)
	}
	// The kubeconfig keeps what the provider parses (the active cluster) and loses the credentials.
	var d struct {
		Deployment struct {
			Resources []struct {
				Inputs map[string]json.RawMessage `json:"inputs"`
			} `json:"resources"`
		} `json:"deployment"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	var sec struct{ Plaintext string }
	if err := json.Unmarshal(d.Deployment.Resources[1].Inputs["kubeconfig"], &sec); err != nil {
		t.Fatal(err)
	}
	var kc string
	if err := json.Unmarshal([]byte(sec.Plaintext), &kc); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		CurrentContext string `yaml:"current-context"`
		Clusters       []struct {
			Cluster map[string]string `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User map[string]any `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal([]byte(kc), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.CurrentContext != "c" || doc.Clusters[0].Cluster["server"] != "https://10.0.0.1" || len(doc.Users[0].User) != 0 {
		t.Errorf("stripped kubeconfig: %+v", doc)
	}
}

// A cloud's kubeconfig signs in through an exec plugin and holds no credential: it is kept byte
// for byte, so the Kubernetes provider sees no change in a preview of the copy.
func TestScrubKeepsAnExecKubeconfig(t *testing.T) {
	out, rep, err := Scrub(deployment(t, "prod", execKubeconfig), []byte(target), "prod", "prod-preview")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(secret(execKubeconfig))
	if strings.Count(string(out), string(want)) != 2 || rep.Kubeconfigs != 2 || rep.Secrets != 2 {
		t.Errorf("the exec kubeconfig was changed (report %+v)", rep)
	}
}

func TestScrubRefusesAnEncryptedExport(t *testing.T) {
	d := strings.Replace(string(deployment(t, "prod", execKubeconfig)), `"plaintext"`, `"ciphertext"`, 1)
	if _, _, err := Scrub([]byte(d), []byte(target), "prod", "prod-preview"); err == nil || !strings.Contains(err.Error(), "--show-secrets") {
		t.Fatalf("error %v, want one asking for --show-secrets", err)
	}
	if _, _, err := Scrub(deployment(t, "prod", execKubeconfig), []byte(`{"version":3,"deployment":{}}`), "prod", "prod-preview"); err == nil {
		t.Fatal("a target without a secrets provider was accepted")
	}
}
