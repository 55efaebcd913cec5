//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestFit runs `make fit`'s command (cmd/fit) on a stack that fits, examples/gpu-dev, and on one
// that does not, testdata/Pulumi.short.yaml (two 8-GPU towers on a pool that starts with one
// 8-GPU node): the verdict is the exit status, the reason is the scheduler's own, and afterwards
// nothing of the throw-away stack is left, in the cluster or under .kolotoc/fit/, and the stack
// file is unchanged. testdata/Pulumi.zero.yaml has its GPU pool at zero: the local cluster's
// Karpenter grows it for the towers, and the report's growth (computed from the configuration)
// matches the nodes it made; its nodes are gone after the clean-up too.
func TestFit(t *testing.T) {
	t.Parallel() // see doc.go
	_, cfg := localCluster(t)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fit")
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin, "./cmd/fit")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fit: %v\n%s", err, out)
	}
	// The program runs through `go run` (cmd/fit), whose executable Go caches: link it once here
	// rather than in both checks at once. Outside Pulumi it stops at once, with an error.
	warm := exec.Command("go", "run", ".")
	warm.Dir = repoRoot
	_ = warm.Run()
	t.Logf("fit and the program built in %s", time.Since(start).Round(time.Second))

	for _, tc := range []struct {
		name, file, mirror string
		code               int
		want               []string
	}{
		{name: "fits", file: "examples/gpu-dev/Pulumi.gpu-dev.yaml", mirror: "fit-gpu-dev", code: 0, want: []string{
			"make fit: stack gpu-dev (examples/gpu-dev/Pulumi.gpu-dev.yaml), mirrored on the local cluster as fit-gpu-dev",
			"  gpu   2      a2-highgpu-8g   16/16 ",
			// The launcher's 0.5 CPU counts though kwok completes a Job's pods at once.
			"  cpu   1      n2-standard-16  -                3/16 ",
			"  StatefulSet/tower               2     2       0        8 GPU, 4.5 CPU, 20Gi  gpu-{0..1}",
			"FITS: all 8 pods placed on 3 nodes",
		}},
		// The aws example's p4d.24xlarge pool: compact in one zone, each node's 4 EFA interfaces
		// advertised and taken by the towers (docs/using/gpus.md).
		{name: "fabric", file: "examples/aws/Pulumi.aws.yaml", mirror: "fit-aws", code: 0, want: []string{
			"Placement and fabric",
			"  gpu: one zone (us-east-1a); fabric efa: 4 vpc.amazonaws.com/efa per node, 8/8 requested",
			"FITS: all ",
		}},
		{name: "from zero", file: "tests/e2e/testdata/Pulumi.zero.yaml", mirror: "fit-zero", code: 0, want: []string{
			"pool gpu (minNodes 0) → a Karpenter NodePool at zero",
			"  gpu   2 (0..4)  a2-highgpu-8g  16/16 ",
			"Growth (autoscaled pools",
			"  pool gpu: grows 0 → 2 nodes of a2-highgpu-8g (max 4): towers 2×8 GPUs; Karpenter made 2 in this run",
			"FITS: all ",
		}},
		{name: "refused as its cloud refuses it", file: "tests/e2e/testdata/Pulumi.uncatalogued.yaml", mirror: "fit-uncatalogued", code: 2, want: []string{
			`kolotoc:nodePools[1].machineType = Standard_D4s_v3: not in Kolotoc's azure catalogue`,
			"refused as `pulumi up` of stack uncatalogued would refuse it",
		}},
		{name: "does not fit", file: "tests/e2e/testdata/Pulumi.short.yaml", mirror: "fit-short", code: 1, want: []string{
			"  gpu   1 (max 2)  a2-highgpu-8g  8/8 ",
			"  StatefulSet/tower               2     1       1        8 GPU, 4 CPU, 16Gi    gpu-0",
			"  StatefulSet/tower tower-1: 0/",
			" Insufficient nvidia.com/gpu",
			"kolotoc:nodePools[0].nodes: 1 → 2 (maxNodes 2 allows it",
			"kolotoc:towers.count: 2 → 1",
			"DOES NOT FIT: 1 of 7 pods not placed",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(repoRoot, tc.file)
			before := fileHash(t, path)
			cmd := exec.Command(bin, tc.file)
			cmd.Dir = repoRoot
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			t.Logf("fit %s: exit %d in %s\n%s", tc.file, code, time.Since(start).Round(100*time.Millisecond), stdout.String())
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, tail(stderr.String()))
			}
			// Columns are as wide as their widest cell: compare with runs of spaces as one.
			report := squash(stdout.String() + stderr.String())
			for _, w := range tc.want {
				if !strings.Contains(report, squash(w)) {
					t.Errorf("report lacks %q", w)
				}
			}

			// Nothing left: the throw-away stack's nodes, namespaces and directory are gone, the
			// stack file is as it was, and no stack file was written next to Pulumi.yaml.
			ctx := context.Background()
			nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "kolotoc.dev/cluster=" + tc.mirror})
			if err != nil || len(nodes.Items) > 0 {
				t.Errorf("nodes of %s left: %d (%v)", tc.mirror, len(nodes.Items), err)
			}
			for _, ns := range []string{"kolotoc-" + tc.mirror, "kolotoc-" + tc.mirror + "-gpu-agents"} {
				if _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("namespace %s left (%v)", ns, err)
				}
			}
			if _, err := os.Stat(filepath.Join(repoRoot, ".kolotoc", "fit", tc.mirror)); !os.IsNotExist(err) {
				t.Errorf(".kolotoc/fit/%s left (%v)", tc.mirror, err)
			}
			if _, err := os.Stat(filepath.Join(repoRoot, "Pulumi."+tc.mirror+".yaml")); !os.IsNotExist(err) {
				t.Errorf("Pulumi.%s.yaml written next to Pulumi.yaml", tc.mirror)
			}
			if after := fileHash(t, path); after != before {
				t.Errorf("%s changed", tc.file)
			}
		})
	}
}

// squash writes every run of spaces as one space.
func squash(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
