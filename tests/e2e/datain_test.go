//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDataInAndPerRoleImagesForReal (issue 33) runs on the real node what the torchelastic guide's
// download pod and the TF charts' per-role images did. The data-in Job (kolotoc:dataIn, in the
// probe's image) puts the TensorFlow probe into the shared store under $KOLOTOC_DATA_DIR; every
// TF task then runs the probe from there, the parameter server in another image (the Dask
// image, standing in for the charts' light CPU image: it has python3 and no probe of its own), so
// each task proving its peers also proves that the data was in place when it started, and that a
// role's own image ran. `pulumi up` returns only once the Job has completed, and no task's pod is
// created before that.
func TestDataInAndPerRoleImagesForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 600) // tfcluster 3 × 50m and a light ps, the scheduler 200m: 500m measured
	task := func(count int) map[string]any {
		return map[string]any{"count": count, "pool": "node", "gpus": 0, "cpu": "50m", "memory": "64Mi"}
	}
	probe, light := localImage(t, "tfprobe"), localImage(t, "dask")
	ps := task(1)
	ps["image"] = light
	overrides := workloadOnly(t, "tfcluster", map[string]any{
		"enabled": true, "image": probe, "tensorboard": false,
		"command": []string{"python3", "/shared/datasets/probe/tf_probe.py"},
		"chief":   task(1), "workers": task(1), "ps": ps, "evaluator": task(0),
	})
	overrides["dataIn"] = map[string]any{
		"enabled": true, "image": probe, "path": "datasets/probe", "cpu": "50m", "memory": "64Mi",
		"command": []string{"sh", "-c", `cp /opt/kolotoc/tf_probe.py "$KOLOTOC_DATA_DIR/" && ls -l "$KOLOTOC_DATA_DIR"`},
	}
	s := newStack(t, "e2e-datain", "dev", overrides)
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	s.up()

	// The Job completed before `pulumi up` returned (the provider awaited it).
	jobs, err := s.kube.BatchV1().Jobs(ns).List(context.Background(), listOpts(s.selector()+",app.kubernetes.io/component=data-in"))
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("data-in Jobs: %v, %v", jobs, err)
	}
	job := jobs.Items[0]
	var done *v1.Time
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			done = &c.LastTransitionTime
		}
	}
	if done == nil {
		t.Fatalf("the data-in Job had not completed when pulumi up returned: %+v", job.Status)
	}
	pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts(s.selector()+",app.kubernetes.io/component=data-in"))
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("data-in pods: %v", err)
	}
	b, err := s.kube.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).Do(context.Background()).Raw()
	if err != nil {
		t.Fatal(err)
	}
	logs := string(b)
	if !strings.Contains(logs, "tf_probe.py") || !strings.Contains(logs, "data-in: done: /shared/datasets/probe") {
		t.Errorf("data-in log:\n%s", logs)
	}

	tasks := map[string]struct {
		id, image string
		peers     int
	}{
		"tf-chief-0": {"chief:0", probe, 2}, "tf-worker-0": {"worker:0", probe, 2}, "tf-ps-0": {"ps:0", light, 2},
	}
	doneRE := regexp.MustCompile(`tf-probe: (\S+) done: (?:reached all )?(\d+) peers`)
	for pod, want := range tasks {
		p, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), pod, v1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Spec.Containers[0].Image; got != want.image {
			t.Errorf("%s runs %s, want %s", pod, got, want.image)
		}
		if p.CreationTimestamp.Before(done) {
			t.Errorf("%s was created at %s, before the data-in Job completed (%s)", pod, p.CreationTimestamp, done)
		}
		var out string
		waitFor(t, pod+"'s probe to finish", 4*time.Minute, func() (bool, string) {
			b, err := s.kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).Do(context.Background()).Raw()
			if err != nil {
				return false, err.Error()
			}
			out = string(b)
			return doneRE.MatchString(out), tail(out)
		})
		m := doneRE.FindStringSubmatch(out)
		if m[1] != want.id || m[2] != fmt.Sprint(want.peers) {
			t.Errorf("%s: the probe says it is %s and reached %s peers; want %s and %d:\n%s", pod, m[1], m[2], want.id, want.peers, tail(out))
		}
		t.Logf("%s (%s): %s", pod, want.image, m[0])
	}
}
