//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestTFClusterProbeRunsForReal runs the TensorFlow cluster (kolotoc:tfcluster) on the real node.
// Debian has no TensorFlow, so every task runs Kolotoc's TensorFlow probe (testbed/images/tfprobe),
// which reads TF_CONFIG as tf.distribute does, serves its own gRPC port and dials every other
// task of the cluster spec, checking that the task answering is the one the spec names there.
// It proves the cluster spec, the task types and indexes, the names, the ports and the
// NetworkPolicies a real TensorFlow cluster relies on; not TensorFlow itself.
func TestTFClusterProbeRunsForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 800) // tfcluster 5 × 50m, the scheduler 200m: 700m measured
	task := func(count int) map[string]any {
		return map[string]any{"count": count, "pool": "node", "gpus": 0, "cpu": "50m", "memory": "64Mi"}
	}
	s := newStack(t, "e2e-tf", "dev", workloadOnly(t, "tfcluster", map[string]any{
		"enabled": true, "image": localImage(t, "tfprobe"), "tensorboard": false,
		"command": []string{"python3", "/opt/kolotoc/tf_probe.py"},
		"chief":   task(1), "workers": task(2), "ps": task(1), "evaluator": task(1),
	}))
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	flows := recordFlows(t, s)
	s.up()

	// Each task: its pod name's ordinal is its index; the cluster tasks reach the 3 others.
	tasks := map[string]struct {
		id    string
		peers int
	}{
		"tf-chief-0": {"chief:0", 3}, "tf-worker-0": {"worker:0", 3}, "tf-worker-1": {"worker:1", 3},
		"tf-ps-0": {"ps:0", 3}, "tf-evaluator-0": {"evaluator:0", 0},
	}
	done := regexp.MustCompile(`tf-probe: (\S+) done: (?:reached all )?(\d+) peers`)
	for pod, want := range tasks {
		var logs string
		waitFor(t, pod+"'s probe to finish", 4*time.Minute, func() (bool, string) {
			b, err := s.kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).Do(context.Background()).Raw()
			if err != nil {
				return false, err.Error()
			}
			logs = string(b)
			return done.MatchString(logs), tail(logs)
		})
		m := done.FindStringSubmatch(logs)
		if m[1] != want.id || m[2] != fmt.Sprint(want.peers) {
			t.Errorf("%s: the probe says it is %s and reached %s peers; want %s and %d:\n%s", pod, m[1], m[2], want.id, want.peers, tail(logs))
		}
		t.Logf("%s: %s", pod, m[0])
	}
	runsAsDevUser(t, s, ns, "tf-worker-0", "worker") // every task as kolotoc:runAsUser, not root

	t.Run("the NetworkPolicies admit the tasks' traffic, and refuse what Kolotoc forbids", func(t *testing.T) {
		s := s.sub(t)
		chief, worker, ps := podEnd(t, s, ns, "tf-chief-0"), podEnd(t, s, ns, "tf-worker-0"), podEnd(t, s, ns, "tf-ps-0")
		evaluator, entry := podEnd(t, s, ns, "tf-evaluator-0"), podEnd(t, s, ns, s.podName(t, ns, "entrypoint"))
		grpc := chief.port(t, "grpc")
		checkFlows(t, s, flows, missingAllow{"tf-tasks", "tf-chief", "tf-worker"}, []flow{
			{From: evaluator, To: worker, Port: grpc},        // the evaluator is not in the cluster
			{From: entry, To: ps, Port: grpc},                // nor is the entrypoint
			{From: elsewhere(worker), To: chief, Port: grpc}, // nor another namespace
			{From: chief, To: worker, Port: grpc + 1},        // only the gRPC port
		})
	})
}
