//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBenchScale runs bench/scale (make bench-scale) at two small sizes, so that the benchmark
// keeps working between the times someone measures with it, and checks what it must show at any
// size: both stacks deployed and their floors ready, a ratio, the simulated nodes asked for (one
// per 8 ranks, plus the CPU node) from resources whose number does not grow with N (a pool is one
// resource, as a cloud's node pool is), outputs that do not grow, and nothing left behind.
func TestBenchScale(t *testing.T) {
	t.Parallel() // see doc.go
	// The benchmark reads the same KOLOTOC_KUBECONFIG: fail early, and clearly, without it.
	localCluster(t)
	cmd := exec.Command("go", "run", "./bench/scale", "-sizes", "8,24")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("bench/scale: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("bench/scale:\n%s", out)
	type row struct{ ranks, nodes, resources, nodeResources, outputs int }
	var rows []row
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(l, "|")
		if len(f) < 12 {
			continue
		}
		ranks, err := strconv.Atoi(strings.TrimSpace(f[1]))
		if err != nil {
			continue // the header
		}
		var r row
		r.ranks = ranks
		r.nodes, _ = strconv.Atoi(strings.TrimSpace(f[2]))
		res := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(f[3]))
		if len(res) == 2 {
			r.resources, _ = strconv.Atoi(res[0])
			r.nodeResources, _ = strconv.Atoi(res[1])
		}
		r.outputs, _ = strconv.Atoi(strings.TrimSpace(f[5]))
		if ratio, err := strconv.ParseFloat(strings.TrimSpace(f[8]), 64); err != nil || ratio <= 0 {
			t.Errorf("N=%d: ratio %q", ranks, f[8])
		}
		rows = append(rows, r)
	}
	if len(rows) != 2 {
		t.Fatalf("%d result rows, want 2:\n%s", len(rows), out)
	}
	for _, r := range rows {
		if r.nodes != r.ranks/8+1 || r.nodeResources != 2 {
			t.Errorf("N=%d: %d nodes from %d node resources, want %d from 2 pools", r.ranks, r.nodes, r.nodeResources, r.ranks/8+1)
		}
	}
	small, large := rows[0], rows[1]
	if small.resources != large.resources || small.resources == 0 {
		t.Errorf("resources: %d at N=%d, %d at N=%d: they must not depend on N", small.resources, small.ranks, large.resources, large.ranks)
	}
	// bench-8 and bench-24 differ by one character, which the outputs repeat in names.
	if d := large.outputs - small.outputs; d < 0 || d > 40 {
		t.Errorf("outputs: %d bytes at N=%d, %d at N=%d: they must not grow with N", small.outputs, small.ranks, large.outputs, large.ranks)
	}
	left, err := os.ReadDir(filepath.Join(repoRoot, ".kolotoc", "bench"))
	if err == nil {
		for _, e := range left {
			if e.IsDir() {
				t.Errorf("bench/scale left its throw-away stack %s under .kolotoc/bench/", e.Name())
			}
		}
	}
}
