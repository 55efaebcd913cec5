//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestSentinelWatchesTowerForReal (issue 33): with sentinels.watchProcesses a tower's sentinel
// shares the tower pod's process namespace on the real node, so from the sentinel's container
// the tower's sshd is visible among the processes, as the old chart's sentinels watched the
// machine during training. The real node has no GPU: GPU state is not checked here.
func TestSentinelWatchesTowerForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 800) // a tower and its sentinel, the launcher, the entrypoint with Jupyter
	overrides := workloadOnly(t, "towers", map[string]any{
		"image": localImage(t, "mpi"), "count": 1, "gpusPerTower": 0, "pool": "node", "cpu": "100m", "memory": "256Mi",
		"launcherCpu": "100m", "launcherMemory": "128Mi", "command": []string{"true"},
	})
	overrides["carriers"] = map[string]any{"enabled": false, "image": localImage(t, "dask")} // the sentinels' image
	overrides["sentinels"] = map[string]any{"enabled": true, "watchProcesses": true, "threads": 1, "cpu": "100m", "memory": "512Mi"}
	s := newStack(t, "e2e-watch", "dev", overrides)
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	s.up()
	procs := s.kubectl(t, "", "-n", ns, "exec", "tower-0", "-c", "sentinel", "--", "sh", "-c", "cat /proc/[0-9]*/comm")
	if !strings.Contains(procs, "sshd") || !strings.Contains(procs, "dask") && !strings.Contains(procs, "python") {
		t.Errorf("the sentinel sees these processes, want the tower's sshd beside its own:\n%s", procs)
	}
	t.Logf("processes the sentinel sees: %s", strings.Join(strings.Fields(procs), " "))
}
