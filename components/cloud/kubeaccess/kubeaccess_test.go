package kubeaccess

import "testing"

// TestExecKubeconfig pins the kubeconfig users get from `pulumi stack output kubeconfig` on EKS
// (as eks.Kubeconfig builds it): the exec plugin's fields in order, interactiveMode last.
func TestExecKubeconfig(t *testing.T) {
	got := ExecKubeconfig("c1", "https://abc.eks.amazonaws.com", "Q0E=",
		"command: aws", "args: [eks, get-token, --cluster-name, c1, --region, eu-west-1, --output, json]")
	want := `apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: https://abc.eks.amazonaws.com
    certificate-authority-data: Q0E=
contexts:
- name: c1
  context:
    cluster: c1
    user: c1
current-context: c1
users:
- name: c1
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, c1, --region, eu-west-1, --output, json]
      interactiveMode: IfAvailable
`
	if got != want {
		t.Errorf("kubeconfig:\n%s\nwant:\n%s", got, want)
	}
}

func TestTaintEffect(t *testing.T) {
	for in, want := range map[string]string{"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"} {
		if got := TaintEffect(in); got != want {
			t.Errorf("TaintEffect(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestTaintString(t *testing.T) {
	if got := (Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}).String(); got != "nvidia.com/gpu=present:NoSchedule" {
		t.Errorf("taint %q, want kubectl's notation", got)
	}
}

// TestNamePrefix: a pool's name prefix leaves room for the provider's unique suffix within the
// cloud's limit (GKE 40, EKS 63), and never ends in a doubled separator.
func TestNamePrefix(t *testing.T) {
	for _, c := range []struct {
		pool string
		max  int
		want string
	}{
		{"gpu", 40, "gpu-"},
		{"a100-spot-training", 40, "a100-spot-tra-"},
		{"abcdefghijkl-mn", 40, "abcdefghijkl-"},
		{"a100-spot-training", 63, "a100-spot-training-"},
	} {
		got := NamePrefix(c.pool, c.max)
		if got != c.want || len(got)+UniqueSuffixLen > c.max {
			t.Errorf("NamePrefix(%q, %d) = %q (%d with the suffix), want %q within %d", c.pool, c.max, got, len(got)+UniqueSuffixLen, c.want, c.max)
		}
	}
}
