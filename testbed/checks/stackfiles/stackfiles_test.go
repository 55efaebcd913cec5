package stackfiles

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestCommittedLeavesOutWhatTheSuiteWrites: a stack file the e2e suite writes beside Pulumi.yaml
// (untracked) is not listed; the committed ones are, beside Pulumi.yaml and in examples/*/.
func TestCommittedLeavesOutWhatTheSuiteWrites(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"Pulumi.yaml", "Pulumi.dev.yaml", "examples/gpu/Pulumi.gpu.yaml", "Pulumi.qa-1a2b3c.yaml"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte("config: {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "Pulumi.yaml", "Pulumi.dev.yaml", "examples/gpu/Pulumi.gpu.yaml"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	got, err := Committed(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "Pulumi.dev.yaml"), filepath.Join(root, "examples/gpu/Pulumi.gpu.yaml")}
	if !slices.Equal(got, want) {
		t.Errorf("Committed = %v, want %v", got, want)
	}
}
