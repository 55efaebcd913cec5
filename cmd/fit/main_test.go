package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusedWithoutCluster: with the local cluster down, make fit says so, says how to start it,
// changes nothing (no .kolotoc/fit/ directory, no stack) and exits 2.
func TestRefusedWithoutCluster(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// Port 1 on loopback: nothing listens there.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: admin, user: {token: t}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir("../..")
	before, _ := os.ReadDir(".kolotoc/fit")
	for _, kc := range []string{kubeconfig, filepath.Join(dir, "missing")} {
		t.Setenv("KOLOTOC_KUBECONFIG", kc)
		var stdout, stderr strings.Builder
		if code := run([]string{"prod"}, &stdout, &stderr); code != exitCannot {
			t.Errorf("%s: exit %d, want %d", kc, code, exitCannot)
		}
		msg := stderr.String()
		for _, want := range []string{"the local cluster is not up (" + kc, "start it with `make cluster`", "make fit never starts or stops it"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message lacks %q:\n%s", want, msg)
			}
		}
		if stdout.Len() > 0 {
			t.Errorf("a report without a cluster:\n%s", stdout.String())
		}
	}
	if after, _ := os.ReadDir(".kolotoc/fit"); len(after) != len(before) {
		t.Errorf(".kolotoc/fit changed: %d entries, had %d", len(after), len(before))
	}
}

func TestResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ arg, stack, rel string }{
		{"prod", "prod", "Pulumi.prod.yaml"},
		{"aws", "aws", "examples/aws/Pulumi.aws.yaml"},
		{filepath.Join(root, "examples/gpu-dev/Pulumi.gpu-dev.yaml"), "gpu-dev", "examples/gpu-dev/Pulumi.gpu-dev.yaml"},
	} {
		stack, rel, err := resolve(root, tc.arg)
		if err != nil || stack != tc.stack || rel != tc.rel {
			t.Errorf("resolve(%q) = %q, %q, %v; want %q, %q", tc.arg, stack, rel, err, tc.stack, tc.rel)
		}
	}
	for _, arg := range []string{"nosuch", filepath.Join(root, "Pulumi.yaml"), "/nonexistent/Pulumi.x.yaml"} {
		if _, _, err := resolve(root, arg); err == nil {
			t.Errorf("resolve(%q) accepted", arg)
		}
	}
}

func TestConfigProblems(t *testing.T) {
	out := `Updating (fit-bad):
    pulumi:pulumi:Stack kolotoc-fit-bad  error: stack "fit-bad": 2 configuration problem(s); nothing was changed:
      - kolotoc:towers.count = 3: allowed: 1..2
      - kolotoc:carriers.pool = big: not declared
    pulumi:pulumi:Stack kolotoc-fit-bad **failed** 1 error
`
	want := "stack \"fit-bad\": 2 configuration problem(s); nothing was changed:\n  - kolotoc:towers.count = 3: allowed: 1..2\n  - kolotoc:carriers.pool = big: not declared"
	if got := configProblems(out); got != want {
		t.Errorf("configProblems:\n%s\nwant:\n%s", got, want)
	}
	if got := configProblems("error: connection refused"); got != "" {
		t.Errorf("a failure that is no refusal read as one: %q", got)
	}
}
