//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kolotoc/components/meta"
)

// realNode is the local cluster's real node (testbed/node/node.sh) and the label real pools select.
const (
	realNode      = "kolotoc-node"
	realNodeLabel = "kolotoc.dev/real-node"
)

// TestDevStackRunsForReal deploys the committed dev stack, whose pool is the local cluster's real
// node, and checks that its workloads do their job: the launcher's mpirun over every tower, a Dask
// computation on carriers and sentinels, a Jupyter login through the printed port-forward, a file
// shared between workloads, and every printed command working as printed.
//
// The real node has 2 cores: its tests share them by what their pods request (lockRealNode); the
// other stacks use simulated nodes only and run beside them.
func TestDevStackRunsForReal(t *testing.T) {
	t.Parallel()          // with the simulated-only tests; see doc.go
	lockRealNode(t, 1500) // the dev stack: 2 towers with their sentinels, the launcher, a carrier, the entrypoint
	// Jupyter serves HTTPS with a certificate of the stack (test data: localhost, 127.0.0.1).
	cert, key := readFile(t, "../testdata/tls/jupyter.crt"), readFile(t, "../testdata/tls/jupyter.key")
	entry, _ := configValue(t, "dev", "kolotoc:entrypoint").(map[string]any)
	entry["tlsCertificate"] = cert
	s := newStack(t, "e2e-dev", "dev", map[string]any{"entrypoint": entry})
	s.secrets["kolotoc:entrypointTLSKey"] = key
	s.pulumiStdin(key, "config", "set", "--secret", "kolotoc:entrypointTLSKey")
	// A client that trusts the stack's certificate alone: connections are verified, not merely
	// encrypted.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(cert))
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	flows := recordFlows(t, s)

	start := time.Now()
	summary := s.up()
	t.Logf("first up: %v in %s", summary, time.Since(start).Round(time.Second))

	t.Run("every pod runs on the real node", func(t *testing.T) {
		waitFor(t, "every pod of the stack Running on "+realNode, 5*time.Minute, func() (bool, string) {
			pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts(s.selector()))
			if err != nil || len(pods.Items) == 0 {
				return false, fmt.Sprint("no pods yet ", err)
			}
			var bad []string
			for _, p := range pods.Items {
				if p.Spec.NodeName != realNode {
					bad = append(bad, p.Name+" on "+p.Spec.NodeName)
				} else if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodSucceeded {
					bad = append(bad, p.Name+" "+string(p.Status.Phase)+podWaitingReason(&p))
				}
			}
			return len(bad) == 0, strings.Join(bad, ", ")
		})
	})

	out := s.outputs()
	str := func(k string) string {
		v, _ := out[k].(string)
		if v == "" {
			t.Fatalf("output %s missing: %v", k, out)
		}
		return v
	}

	t.Run("the demo's training over every tower", func(t *testing.T) {
		s := s.sub(t)
		job := s.waitJob(t, ns, "launcher", 6*time.Minute)
		if job.Status.Succeeded == 0 {
			t.Errorf("launcher failed: %+v", job.Status)
		}
		// The printed command, as printed.
		logs := s.shell(t, str("launcherLogs"), "")
		towers := 2
		// train.py (testbed/node/demo-code): data-parallel SGD over every rank, checkpointing.
		m := regexp.MustCompile(`train: done steps=(\d+) ranks=(\d+) hosts=(\S+) loss=(\S+) digest=([0-9a-f]+)`).FindStringSubmatch(logs)
		if m == nil {
			t.Fatalf("launcher log has no finished training:\n%s", tail(logs))
		}
		if m[2] != fmt.Sprint(towers) {
			t.Errorf("training over %s ranks, want %d", m[2], towers)
		}
		hosts := strings.Split(m[3], ",")
		for i := 0; i < towers; i++ {
			if !slices.Contains(hosts, fmt.Sprintf("tower-%d", i)) {
				t.Errorf("rank hosts %v lack tower-%d", hosts, i)
			}
		}
		t.Logf("launcher: %s", m[0])
		// Every rank ran the code cloned from the test bed's repository (kolotoc:code), and got
		// the variable the stack gives the towers (towers.env).
		served := servedCommit(t)
		for i := 0; i < towers; i++ {
			want := fmt.Sprintf("on tower-%d code=%s greeting=hello from Pulumi.dev.yaml", i, served)
			if !strings.Contains(logs, want) {
				t.Errorf("launcher log lacks %q (code of the served commit, env of the stack):\n%s", want, tail(logs))
			}
		}
	})

	t.Run("every training container runs as kolotoc:runAsUser, and writes the shared claim", func(t *testing.T) {
		s := s.sub(t)
		want := fmt.Sprint(devRunAsUser(t))
		// Every rank ran as the user, over ssh to a sshd running as the user.
		logs := s.shell(t, str("launcherLogs"), "")
		for i := 0; i < 2; i++ {
			if !regexp.MustCompile(fmt.Sprintf(`on tower-%d code=\S+ greeting=.* uid=%s\b`, i, want)).MatchString(logs) {
				t.Errorf("no rank on tower-%d reports uid=%s:\n%s", i, want, tail(logs))
			}
		}
		for _, c := range []struct {
			pod, container, want string
			cmd                  []string
		}{
			{"tower-0", "tower", want, []string{"sh", "-c", "id -u; id -g; ps -o uid= -C sshd | sort -u"}},
			{"tower-0", "sentinel", want, []string{"id", "-u"}},
			{"carrier-0", "dask-worker", want, []string{"id", "-u"}},
			{"deploy/entrypoint", "jupyter", want, []string{"id", "-u"}},
			// nobody, whatever runAsUser says: it writes nothing
			{"deploy/entrypoint", "dask-scheduler", "65534", []string{"id", "-u"}},
		} {
			got := strings.Fields(s.kubectl(t, "", append([]string{"-n", ns, "exec", c.pod, "-c", c.container, "--"}, c.cmd...)...))
			if len(got) == 0 {
				t.Errorf("%s/%s: no id printed", c.pod, c.container)
			}
			for _, id := range got {
				if id != c.want {
					t.Errorf("%s/%s runs as %v, want every id %s", c.pod, c.container, got, c.want)
					break
				}
			}
		}
		// The claim's root was given to the user, and the run's checkpoints and result are the
		// user's (the run's checkpoint directory: towers.run unset, "default").
		own := strings.Fields(s.kubectl(t, "", "-n", ns, "exec", "tower-0", "-c", "tower", "--",
			"stat", "-c", "%u:%g", "/shared", "/shared/checkpoints/towers/default/result.txt"))
		if len(own) != 2 || own[0] != want+":"+want || own[1] != want+":"+want {
			t.Errorf("/shared and the run's result belong to %v, want %s:%s both", own, want, want)
		}
		job := s.waitJob(t, ns, "shared-owner", time.Minute)
		if job.Status.Succeeded != 1 {
			t.Errorf("the shared-owner Job: %+v", job.Status)
		}
	})

	t.Run("interactive mpirun from a tower, as the README shows", func(t *testing.T) {
		s := s.sub(t)
		out := s.kubectl(t, "", "-n", ns, "exec", "tower-0", "-c", "tower", "--", "bash", "-c", interactiveMpirun)
		if !strings.Contains(out, "allreduce: sum=3 expected=3 ranks=2") {
			t.Errorf("mpirun from tower-0 did not run over both towers:\n%s", tail(out))
		}
	})

	t.Run("towers: Kolotoc's sshd takes the key only, under seccomp", func(t *testing.T) {
		s := s.sub(t)
		script := fmt.Sprintf(`
sshd -T -f /etc/kolotoc/scripts/sshd_config -p "$KOLOTOC_SSH_PORT" | grep -E '^(passwordauthentication|permitrootlogin|allowtcpforwarding|x11forwarding|permittunnel) '
echo "seccomp $(awk '/^Seccomp:/ {print $2}' /proc/self/status)"
ssh -n -o BatchMode=yes -o PubkeyAuthentication=no -o ConnectTimeout=10 tower-1.tower.%s.svc true 2>&1 || true
ssh -n -o BatchMode=yes -o ConnectTimeout=10 tower-1.tower.%s.svc echo key-login-ok 2>&1
`, ns, ns)
		out := s.kubectl(t, script, "-n", ns, "exec", "-i", "tower-0", "-c", "tower", "--", "bash", "-s")
		for _, want := range []string{
			// sshd runs as kolotoc:runAsUser (dev: 1000): it can let in no one but that user.
			"passwordauthentication no", "permitrootlogin no", "allowtcpforwarding no", "x11forwarding no",
			"permittunnel no",
			"seccomp 2", // filter mode: the runtime's default profile, not unconfined (0)
			// Without a key, the server offers nothing else: no password, no keyboard-interactive.
			"Permission denied (publickey)",
			"key-login-ok",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("tower-0 lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("Dask computes on carriers and sentinels", func(t *testing.T) {
		s := s.sub(t)
		addr := str("daskSchedulerAddress")
		script := fmt.Sprintf(`
import json, socket
from distributed import Client
c = Client(%q, timeout=60)
c.wait_for_workers(3, timeout=120)
workers = c.scheduler_info()["workers"]
futs = [c.submit(lambda i: (i * i, socket.gethostname()), i, workers=[a], pure=False, allow_other_workers=False)
        for i, a in enumerate(sorted(workers))]
res = c.gather(futs)
print("RESULT " + json.dumps({"names": sorted(w["name"] for w in workers.values()), "results": res}))
`, addr)
		// The scheduler runs as nobody (components/entrypoint NonRootUser), not root.
		if uid := strings.TrimSpace(s.kubectl(t, "", "-n", ns, "exec", "deploy/entrypoint", "-c", "dask-scheduler", "--", "id", "-u")); uid != "65534" {
			t.Errorf("dask-scheduler runs as uid %s, want 65534", uid)
		}
		logs := s.kubectl(t, script, "-n", ns, "exec", "-i", "deploy/entrypoint", "-c", "dask-scheduler", "--", "python3", "-")
		i := strings.Index(logs, "RESULT ")
		if i < 0 {
			t.Fatalf("no result from the Dask client:\n%s", tail(logs))
		}
		var r struct {
			Names   []string
			Results [][2]any
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(logs[i+len("RESULT "):])), &r); err != nil {
			t.Fatal(err)
		}
		var carrier, sentinel bool
		for _, n := range r.Names {
			carrier = carrier || strings.HasPrefix(n, "carrier-")
			sentinel = sentinel || strings.HasPrefix(n, "tower-")
		}
		if !carrier || !sentinel {
			t.Errorf("workers %v: want carriers (carrier-*) and sentinels (tower-*)", r.Names)
		}
		hosts := map[string]bool{}
		for i, res := range r.Results {
			if res[0] != float64(i*i) {
				t.Errorf("task %d returned %v", i, res[0])
			}
			hosts[fmt.Sprint(res[1])] = true
		}
		t.Logf("Dask workers %v computed on pods %v", r.Names, slices.Sorted(maps.Keys(hosts)))
	})

	t.Run("Jupyter: the printed password logs in, a wrong one is refused", func(t *testing.T) {
		s := s.sub(t)
		password := strings.TrimSpace(s.shell(t, str("jupyterPasswordCommand"), ""))
		if password != s.secrets["kolotoc:jupyterPassword"] {
			t.Fatalf("the printed password command does not print the stack's password")
		}
		local := str("jupyterLocalUrl")
		if !strings.HasPrefix(local, "https://localhost:") {
			t.Errorf("jupyterLocalUrl %s: want https://localhost:…", local)
		}
		stop := s.background(t, str("jupyterPortForward"))
		defer stop()
		get := func(token string) int {
			req, _ := http.NewRequest("GET", strings.TrimSuffix(baseURL(local), "/")+"/api/contents", nil)
			req.Header.Set("Authorization", "token "+token)
			resp, err := tlsClient.Do(req)
			if err != nil {
				return -1
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			return resp.StatusCode
		}
		waitFor(t, "Jupyter through the port-forward", time.Minute, func() (bool, string) {
			c := get(password)
			return c == http.StatusOK, fmt.Sprint("status ", c)
		})
		if c := get("wrong-" + password); c != http.StatusForbidden && c != http.StatusUnauthorized {
			t.Errorf("a wrong password got status %d, want 403", c)
		}
		// Plain HTTP gets no answer from Jupyter.
		plain := "http://" + strings.TrimPrefix(strings.TrimSuffix(baseURL(local), "/"), "https://") + "/api/contents"
		req, _ := http.NewRequest("GET", plain, nil)
		req.Header.Set("Authorization", "token "+password)
		if resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("Jupyter answered plain HTTP at %s with %d", plain, resp.StatusCode)
			}
		}
	})

	t.Run("a file written by a tower is read by a carrier", func(t *testing.T) {
		s := s.sub(t)
		name := "/shared/e2e-" + randomHex(t, 6)
		want := randomHex(t, 16)
		s.kubectl(t, "", "-n", ns, "exec", "tower-0", "-c", "tower", "--", "sh", "-c", "echo "+want+" >"+name)
		got := s.kubectl(t, "", "-n", ns, "exec", "carrier-0", "-c", "dask-worker", "--", "cat", name)
		if strings.TrimSpace(got) != want {
			t.Errorf("carrier-0 read %q from %s, tower-0 wrote %q", got, name, want)
		}
	})

	t.Run("every printed command works as printed", func(t *testing.T) {
		s := s.sub(t)
		for _, k := range slices.Sorted(maps.Keys(out)) {
			cmd, ok := out[k].(string)
			if !ok || !(strings.HasPrefix(cmd, "kubectl ") || strings.HasPrefix(cmd, "pulumi ")) {
				continue
			}
			switch {
			case strings.Contains(cmd, " port-forward "):
				stop := s.background(t, cmd)
				port := regexp.MustCompile(` (\d+):\d+$`).FindStringSubmatch(cmd)
				if port == nil {
					t.Errorf("%s: no local port in %q", k, cmd)
					stop()
					continue
				}
				// The scheme of the service's printed local URL: a plain request to a TLS port
				// would make kubectl drop the forward.
				scheme, client := "http", http.DefaultClient
				if u, _ := out[strings.TrimSuffix(k, "PortForward")+"LocalUrl"].(string); strings.HasPrefix(u, "https:") {
					scheme, client = "https", tlsClient
				}
				waitFor(t, k+" listening", 30*time.Second, func() (bool, string) {
					// Any HTTP answer means the pod behind the forward answered.
					resp, err := client.Get(scheme + "://localhost:" + port[1] + "/")
					if err != nil {
						return false, err.Error()
					}
					resp.Body.Close()
					return true, ""
				})
				stop()
			case strings.Contains(cmd, " logs -f "):
				// A followed log never ends: the same command without -f shows the same pod and
				// container's log and returns.
				s.shell(t, strings.Replace(cmd, " logs -f ", " logs ", 1), "")
			default:
				// exec -it commands get a shell that reads `exit 0` from stdin.
				s.shell(t, cmd, "exit 0\n")
			}
			t.Logf("ran %s: %s", k, cmd)
		}
	})

	// Last, once every workload above has done its job: the connections they made, judged.
	t.Run("the NetworkPolicies admit the traffic the workloads made, and refuse what Kolotoc forbids", func(t *testing.T) {
		s := s.sub(t)
		tower := podEnd(t, s, ns, "tower-0")
		carrier := podEnd(t, s, ns, "carrier-0")
		entry := podEnd(t, s, ns, s.podName(t, ns, "entrypoint"))
		launcher := podEnd(t, s, ns, s.podName(t, ns, "launcher"))
		ssh, scheduler, jupyter := tower.port(t, "ssh"), entry.port(t, "scheduler"), entry.port(t, "jupyter")
		outside := flowEnd{IP: "192.0.2.10", name: "an address outside the cluster"}
		metadata := flowEnd{IP: "169.254.169.254", name: "the clouds' node metadata endpoint"}
		metadata6 := flowEnd{IP: "fd00:ec2::254", name: "EC2's IPv6 metadata endpoint"}
		checkFlows(t, s, flows, missingAllow{"mpi-towers", "launcher", "tower"}, []flow{
			{From: carrier, To: tower, Port: ssh},                  // a Dask worker to a tower's sshd
			{From: entry, To: tower, Port: ssh},                    // Jupyter to a tower's sshd
			{From: carrier, To: launcher, Port: 40000},             // anything but a tower to mpirun's ports
			{From: elsewhere(carrier), To: entry, Port: scheduler}, // another namespace to the Dask scheduler
			{From: elsewhere(tower), To: entry, Port: jupyter},     // another namespace to Jupyter
			{From: outside, To: tower, Port: ssh},                  // outside to a tower's sshd
			{From: tower, To: metadata, Port: 80},                  // a tower to the node's credentials
			{From: carrier, To: metadata, Port: 80},                // a Dask worker (runs anyone's code) likewise
			{From: entry, To: metadata6, Port: 80},                 // Jupyter, over IPv6
		})
	})

	// Last, since it takes the towers away: a day of runs.
	t.Run("runs: suspend and resume, a run that frees its towers, a new run", func(t *testing.T) {
		s := s.sub(t)
		s.runLifecycle(t, ns, entry)
	})
}

// interactiveMpirun is the docs' command (docs/using/workflow.md) for mpirun from a tower's shell (gotoTower): the
// hostfile's path is in every tower's environment, and without -np mpirun starts a rank per slot.
const interactiveMpirun = `mpirun --hostfile "$KOLOTOC_HOSTFILE" -x DEMO_GREETING python3 /code/allreduce.py`

// devRunAsUser is the dev stack's kolotoc:runAsUser; the test fails when it sets none, since dev
// is the stack that shows the workloads running as a user.
func devRunAsUser(t *testing.T) int {
	t.Helper()
	uid, ok := configValue(t, "dev", "kolotoc:runAsUser").(int)
	if !ok || uid == 0 {
		t.Fatalf("the dev stack sets no kolotoc:runAsUser (%v)", configValue(t, "dev", "kolotoc:runAsUser"))
	}
	return uid
}

// runsAsDevUser checks that a container runs as the dev stack's kolotoc:runAsUser, user and group.
func runsAsDevUser(t *testing.T, s *stack, ns, pod, container string) {
	t.Helper()
	want := fmt.Sprint(devRunAsUser(t))
	got := strings.Fields(s.kubectl(t, "", "-n", ns, "exec", pod, "-c", container, "--", "sh", "-c", "id -u; id -g"))
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("%s/%s runs as uid and gid %v, want %s (kolotoc:runAsUser of dev)", pod, container, got, want)
	}
}

// servedCommit is the commit the test bed's git daemon serves as demo.git's main.
func servedCommit(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+clusterNetns(), "--", "git", "ls-remote", "git://10.213.0.2/demo.git", "refs/heads/main").Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) == 0 || len(f[0]) != 40 {
		t.Fatalf("git ls-remote of the served demo repository: %q %v", out, err)
	}
	return f[0]
}

// runLifecycle takes the dev stack through a day of runs: every GPU suspended and brought back
// unchanged; a run whose launcher frees the towers on success, which the next up leaves alone;
// a new run id that starts exactly a new launcher and brings the towers back.
func (s *stack) runLifecycle(t *testing.T, ns string, entry map[string]any) {
	towers, _ := configValue(t, "dev", "kolotoc:towers").(map[string]any)
	reconfigure := func(extra map[string]any) {
		o := map[string]any{"towers": towers, "entrypoint": entry}
		for k, v := range extra {
			o[k] = v
		}
		s.reconfigure("dev", o)
	}
	sts := func() (spec, ready int32, revision string) {
		st, err := s.kube.AppsV1().StatefulSets(ns).Get(context.Background(), "tower", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *st.Spec.Replicas, st.Status.ReadyReplicas, st.Status.UpdateRevision
	}
	towerPods := func() int {
		pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts(s.selector()+",app.kubernetes.io/component=tower"))
		if err != nil {
			t.Fatal(err)
		}
		return len(pods.Items)
	}
	_, _, revision := sts()

	// Suspended: no tower, a suspended launcher; the rest (Jupyter, the carriers) still runs.
	reconfigure(map[string]any{"suspend": true})
	s.up()
	waitFor(t, "the towers gone", 2*time.Minute, func() (bool, string) { n := towerPods(); return n == 0, fmt.Sprint(n, " tower pods") })
	job, err := s.kube.BatchV1().Jobs(ns).Get(context.Background(), "launcher", metav1.GetOptions{})
	if err != nil || job.Spec.Suspend == nil || !*job.Spec.Suspend {
		t.Errorf("launcher not suspended: %v", err)
	}
	if c, err := s.kube.AppsV1().StatefulSets(ns).Get(context.Background(), "carrier", metav1.GetOptions{}); err != nil || c.Status.ReadyReplicas != 1 {
		t.Errorf("suspend took the carriers too: %v", err)
	}
	// A refresh of the suspended stack finds what the program asked for (no tower, a suspended
	// launcher): nothing to record, and the preview after it changes nothing.
	s.pulumi("refresh", "--yes", "--skip-preview")
	if steps, _ := s.preview(); len(steps) != 0 {
		t.Errorf("preview after refreshing the suspended stack: %s, want no change", fmtMap(steps))
	}
	if n := towerPods(); n != 0 {
		t.Errorf("refreshing the suspended stack started %d towers", n)
	}
	// Resumed: the towers come back as they were (the same revision of their pod template).
	reconfigure(nil)
	steps, _ := s.preview()
	if len(steps) != 2 || steps["kubernetes:apps/v1:StatefulSet::towers"] != "update" || steps["kubernetes:batch/v1:Job::towers-launcher"] != "update" {
		t.Errorf("resume previews %s, want the towers and the launcher updated in place", fmtMap(steps))
	}
	s.up()
	if spec, ready, rev := sts(); spec != 2 || ready != 2 || rev != revision {
		t.Errorf("resumed towers: %d/%d ready, revision %s (was %s)", ready, spec, rev, revision)
	}

	// A new run id alone (the towers kept): exactly the launcher replaced.
	towers["run"] = "r2"
	reconfigure(nil)
	if steps, _ := s.preview(); len(steps) != 1 || steps["kubernetes:batch/v1:Job::towers-launcher"] != "replace" {
		t.Errorf("preview of run r2 (towers kept): %s, want exactly the launcher replaced", fmtMap(steps))
	}

	// A run that frees its towers when it succeeds.
	towers["onSuccess"] = "release"
	reconfigure(nil)
	s.up()
	job = s.waitJob(t, ns, "launcher", 5*time.Minute)
	logs := s.kubectl(t, "", "-n", ns, "logs", "job/launcher")
	if job.Status.Succeeded == 0 || job.Labels["kolotoc.dev/run"] != "r2" {
		t.Fatalf("run r2: succeeded %d, labels %v\n%s", job.Status.Succeeded, job.Labels, tail(logs))
	}
	waitFor(t, "the towers released by run r2", 2*time.Minute, func() (bool, string) {
		spec, _, _ := sts()
		n := towerPods()
		return spec == 0 && n == 0, fmt.Sprintf("replicas %d, %d pods", spec, n)
	})
	if !strings.Contains(logs, "releasing the towers") || !strings.Contains(logs, "statefulset tower scaled to 0") {
		t.Errorf("launcher log does not show the release:\n%s", tail(logs))
	}
	// The release account's token may scale the towers to zero and to nothing else: the API
	// server's admission policy refuses any other number (meta.RenderReleasePolicy). Checked as
	// that account (impersonated), with the Role that lets it patch the scale.
	_, restCfg := localCluster(t)
	asAccount := rest.CopyConfig(restCfg)
	asAccount.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":launcher-release"}
	releaseClient, err := kubernetes.NewForConfig(asAccount)
	if err != nil {
		t.Fatal(err)
	}
	asRelease := func(replicas int) (string, error) {
		// A merge patch of the scale subresource, as the launcher's release sends it: its Role
		// may patch that and nothing else (kubectl would read the object first).
		_, err := releaseClient.AppsV1().StatefulSets(ns).Patch(context.Background(), "tower", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)), metav1.PatchOptions{}, "scale")
		if err != nil {
			return err.Error(), err
		}
		return "", nil
	}
	if out, err := asRelease(5); err == nil || !strings.Contains(out, meta.ReleaseOnlyToZero) {
		t.Errorf("the release account scaled the towers to 5 (err %v): %s", err, out)
	}
	if out, err := asRelease(0); err != nil {
		t.Errorf("the release account cannot scale the towers to 0: %v\n%s", err, out)
	}
	if spec, _, _ := sts(); spec != 0 {
		t.Errorf("after the release account's attempts the towers have %d replicas, want 0", spec)
	}
	// The next up, with nothing changed, leaves the released towers alone.
	if steps, _ := s.preview(); len(steps) != 0 {
		t.Errorf("preview after the release: %s, want no change", fmtMap(steps))
	}
	if summary := s.up(); summary["update"]+summary["replace"]+summary["create"]+summary["delete"] != 0 {
		t.Errorf("up after the release: %v, want nothing changed", summary)
	}
	if spec, _, _ := sts(); spec != 0 {
		t.Errorf("the up after the release brought %d towers back", spec)
	}
	// A refresh records the released replicas; the preview after it shows the towers brought
	// back and nothing else, as the README says ("Freeing the GPUs when a run ends"), and the
	// refresh itself starts nothing.
	s.pulumi("refresh", "--yes", "--skip-preview")
	if spec, _, _ := sts(); spec != 0 {
		t.Errorf("the refresh after the release brought %d towers back", spec)
	}
	if steps, _ := s.preview(); len(steps) != 1 || steps["kubernetes:apps/v1:StatefulSet::towers"] != "update" {
		t.Errorf("preview after refreshing the released stack: %s, want exactly the towers updated (brought back)", fmtMap(steps))
	}

	// A new run: exactly a new launcher, and the towers brought back for it.
	towers["run"] = "r3"
	reconfigure(nil)
	steps, _ = s.preview()
	if len(steps) != 2 || steps["kubernetes:batch/v1:Job::towers-launcher"] != "replace" || steps["kubernetes:apps/v1:StatefulSet::towers"] != "update" {
		t.Errorf("preview of run r3: %s, want the launcher replaced and the released towers updated (brought back)", fmtMap(steps))
	}
	s.up()
	job = s.waitJob(t, ns, "launcher", 5*time.Minute)
	logs = s.kubectl(t, "", "-n", ns, "logs", "job/launcher")
	if job.Status.Succeeded == 0 || job.Labels["kolotoc.dev/run"] != "r3" || !strings.Contains(logs, "train: done steps=300 ranks=2") {
		t.Fatalf("run r3: succeeded %d, labels %v\n%s", job.Status.Succeeded, job.Labels, tail(logs))
	}
	waitFor(t, "the towers released by run r3", 2*time.Minute, func() (bool, string) {
		spec, _, _ := sts()
		return spec == 0, fmt.Sprintf("replicas %d", spec)
	})

	// A run that fails: `pulumi up` does not wait for the launcher and succeeds; the Job fails
	// after its retries; the failed run keeps its towers for a look at them (README, "Freeing the
	// GPUs when a run ends"), and the next preview changes nothing.
	towers["run"] = "r4"
	towers["command"] = []any{"sh", "-c", "echo run r4 fails on purpose; exit 3"}
	reconfigure(nil)
	s.up()
	job = s.waitJob(t, ns, "launcher", 5*time.Minute)
	logs = s.kubectl(t, "", "-n", ns, "logs", "job/launcher")
	if job.Status.Succeeded != 0 || job.Status.Failed == 0 || job.Labels["kolotoc.dev/run"] != "r4" || !strings.Contains(logs, "fails on purpose") {
		t.Errorf("run r4: succeeded %d, failed %d, labels %v, want a failed launcher of run r4\n%s", job.Status.Succeeded, job.Status.Failed, job.Labels, tail(logs))
	}
	if spec, ready, _ := sts(); spec != 2 || ready != 2 {
		t.Errorf("the failed run r4 left %d/%d towers ready, want both kept", ready, spec)
	}
	if steps, _ := s.preview(); len(steps) != 0 {
		t.Errorf("preview after the failed run: %s, want no change", fmtMap(steps))
	}
}

// podName is the name of the one pod of the stack's component (the newest, if several).
func (s *stack) podName(t *testing.T, ns, component string) string {
	t.Helper()
	pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts(s.selector()+",app.kubernetes.io/component="+component))
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no %s pod in %s: %v", component, ns, err)
	}
	newest := pods.Items[0]
	for _, p := range pods.Items[1:] {
		if p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	return newest.Name
}

// The real node's CPU is shared by the tests that deploy onto it: each takes the millicores its
// pods request there at most (lockRealNode) and waits until they are free, so that two tests whose
// pods fit together run together and no pod of one stays Pending for another's. A test that
// requests more than it took fails (realNodeWatch): a wrong figure shows at once, never as a
// timeout elsewhere.
const realNodeMilliCPU = 2000 // the real node's allocatable CPU (2 cores, none reserved)

var realNodeShare = struct {
	sync.Mutex
	cond *sync.Cond
	free int
	// owner maps a namespace to the test whose stack it is (ownNamespace), for the watch.
	owner map[string]*testing.T
}{free: realNodeMilliCPU, owner: map[string]*testing.T{}}

func init() { realNodeShare.cond = sync.NewCond(&realNodeShare.Mutex) }

// lockRealNode holds milliCPU of the real node's CPU until the test and its cleanup (the stack's
// destroy) are done: the most that the pods of the test's stacks request on the real node at once,
// summed over their containers as the scheduler counts them (podMilliCPU), checked while the test
// runs. realNodeMilliCPU takes the node whole. It logs how long the test waited and held it and
// what it requested at most: the suite's length is mostly the holds (bench figures for shortening
// it, never assertions).
func lockRealNode(t *testing.T, milliCPU int) {
	t.Helper()
	if milliCPU <= 0 || milliCPU > realNodeMilliCPU {
		t.Fatalf("lockRealNode(%d): between 1 and %d millicores", milliCPU, realNodeMilliCPU)
	}
	asked := time.Now()
	realNodeShare.Lock()
	for realNodeShare.free < milliCPU {
		realNodeShare.cond.Wait()
	}
	realNodeShare.free -= milliCPU
	realNodeShare.Unlock()
	got := time.Now()
	peak, stop := realNodeWatch(t)
	t.Cleanup(func() { // registered first, so it runs after every later cleanup
		stop()
		t.Logf("real node: waited %s, held %s, requested at most %dm of the %dm taken",
			got.Sub(asked).Round(time.Second), time.Since(got).Round(time.Second), *peak, milliCPU)
		if *peak > milliCPU {
			t.Errorf("the pods of this test requested %dm of the real node's CPU at once, more than the %dm it took (lockRealNode): take at least that, or another test's pods may stay Pending for these", *peak, milliCPU)
		}
		realNodeShare.Lock()
		realNodeShare.free += milliCPU
		realNodeShare.cond.Broadcast()
		realNodeShare.Unlock()
	})
}

// ownNamespace records that namespace ns holds the pods of t's stacks (newStack calls it), for the
// watch of what t requests on the real node.
func ownNamespace(t *testing.T, ns string) {
	realNodeShare.Lock()
	defer realNodeShare.Unlock()
	realNodeShare.owner[ns] = t
}

// realNodeWatch samples, every second until stop, the CPU that the pods of t's namespaces
// (ownNamespace) request on the real node, and keeps the most (peak). Pods that have ended request
// nothing (the scheduler counts them so too).
func realNodeWatch(t *testing.T) (peak *int, stop func()) {
	_, cfg := localCluster(t)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	peak = new(int)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sample := func() {
		pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + realNode})
		if err != nil {
			return // a missed sample; the next one counts
		}
		sum := 0
		realNodeShare.Lock()
		for i := range pods.Items {
			p := &pods.Items[i]
			if realNodeShare.owner[p.Namespace] == t && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				sum += podMilliCPU(p)
			}
		}
		realNodeShare.Unlock()
		*peak = max(*peak, sum)
	}
	go func() {
		defer close(done)
		for {
			sample()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return peak, func() { cancel(); <-done }
}

// podMilliCPU is the CPU a pod requests as the scheduler counts it: its containers and sidecars
// (init containers that keep running), or its largest other init container with the sidecars if
// that is more, plus the pod's overhead.
func podMilliCPU(p *corev1.Pod) int {
	var apps, sidecars, init int64
	for _, c := range p.Spec.Containers {
		apps += c.Resources.Requests.Cpu().MilliValue()
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += c.Resources.Requests.Cpu().MilliValue()
		} else {
			init = max(init, c.Resources.Requests.Cpu().MilliValue())
		}
	}
	total := max(apps, init) + sidecars
	if o, ok := p.Spec.Overhead[corev1.ResourceCPU]; ok {
		total += o.MilliValue()
	}
	return int(total)
}

// TestHostNetworkTowersRunForReal runs a tower on the node's own network (towers.hostNetwork,
// for clusters whose pod network is too slow for MPI): sshd and the rank live in the node's
// network namespace, the launcher reaches it by its headless-Service name, and mpirun completes.
// One tower only: two towers on one node would both need the sshd port of the same network.
func TestHostNetworkTowersRunForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 800) // a tower, the launcher, the entrypoint with Jupyter
	towers, _ := configValue(t, "dev", "kolotoc:towers").(map[string]any)
	towers["count"], towers["hostNetwork"] = 1, true
	s := newStack(t, "e2e-hostnet", "dev", map[string]any{
		"towers":    towers,
		"carriers":  map[string]any{"enabled": false},
		"sentinels": map[string]any{"enabled": false},
		// As gcp and azure require with host-network towers (stacks/hostnet.go): under Cilium the
		// metadata egress deny drops the launcher's ssh to the tower on the node's address.
		"cluster": map[string]any{"podMetadataAccess": true},
	})
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	s.up()

	job := s.waitJob(t, ns, "launcher", 6*time.Minute)
	tower, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), "tower-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := s.kube.CoreV1().Nodes().Get(context.Background(), realNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodeIP string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	if !tower.Spec.HostNetwork || tower.Spec.NodeName != realNode || tower.Status.PodIP != nodeIP {
		t.Errorf("tower-0: hostNetwork %v on %s at %s, want the node network of %s (%s)",
			tower.Spec.HostNetwork, tower.Spec.NodeName, tower.Status.PodIP, realNode, nodeIP)
	}
	logs := s.kubectl(t, "", "-n", ns, "logs", "job/launcher")
	if job.Status.Succeeded == 0 {
		t.Fatalf("the launcher failed over a host-network tower: %+v\n%s", job.Status, tail(logs))
	}
	// One rank; its host name is the node's (a host-network pod shares the node's UTS namespace
	// too), not tower-0.
	m := regexp.MustCompile(`train: done steps=\d+ ranks=(\d+) hosts=(\S+)`).FindStringSubmatch(logs)
	if m == nil || m[1] != "1" || strings.Contains(m[2], ",") {
		t.Fatalf("launcher log has no training over the one tower:\n%s", tail(logs))
	}
	t.Logf("launcher over a host-network tower at %s: %s", nodeIP, m[0])
}

// localImage is the reference of a local image (testbed/images/images.sh), as the real node has it.
func localImage(t *testing.T, name string) string {
	t.Helper()
	ref, err := imageRef(name)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// workloadOnly are overrides of the dev stack that leave one workload (key: its config) beside
// the entrypoint's Dask scheduler: no towers, carriers, sentinels or Jupyter, so that it has the
// real node's cores to itself.
func workloadOnly(t *testing.T, key string, config map[string]any) map[string]any {
	t.Helper()
	entrypoint, _ := configValue(t, "dev", "kolotoc:entrypoint").(map[string]any)
	entrypoint["jupyter"] = false
	return map[string]any{
		"towers":     map[string]any{"enabled": false},
		"carriers":   map[string]any{"enabled": false},
		"sentinels":  map[string]any{"enabled": false},
		"entrypoint": entrypoint,
		key:          config,
	}
}

// requireRealNode fails the test unless the local cluster has its real node Ready.
func requireRealNode(t *testing.T, s *stack) {
	t.Helper()
	n, err := s.kube.CoreV1().Nodes().Get(context.Background(), realNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the local cluster has no real node %s (testbed/node/node.sh up): %v", realNode, err)
	}
	if n.Labels[realNodeLabel] != "true" {
		t.Fatalf("node %s lacks the label %s=true", realNode, realNodeLabel)
	}
}

func podWaitingReason(p *corev1.Pod) string {
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := c.State.Waiting; w != nil {
			return " (" + c.Name + ": " + w.Reason + " " + w.Message + ")"
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return " (" + c.Message + ")"
		}
	}
	return ""
}

// waitJob waits until the Job labelled with component finished (succeeded or failed).
func (s *stack) waitJob(t *testing.T, ns, component string, timeout time.Duration) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	sel := s.selector() + ",app.kubernetes.io/component=" + component
	waitFor(t, "the "+component+" Job to finish", timeout, func() (bool, string) {
		jobs, err := s.kube.BatchV1().Jobs(ns).List(context.Background(), listOpts(sel))
		if err != nil || len(jobs.Items) != 1 {
			return false, fmt.Sprintf("%d jobs, %v", len(jobs.Items), err)
		}
		job = &jobs.Items[0]
		for _, c := range job.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("active %d, failed %d", job.Status.Active, job.Status.Failed)
	})
	return job
}

// shellEnv is the environment a user of the printed commands has: the stack's Pulumi backend and
// the local cluster's kubeconfig.
func (s *stack) shellEnv() []string {
	return append(append([]string{}, s.env...), "KUBECONFIG="+s.kubeconfig)
}

// shell runs a printed command as printed (through bash, in the project directory); it must
// succeed.
func (s *stack) shell(t *testing.T, command, stdin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir = repoRoot
	cmd.Env = s.shellEnv()
	cmd.Stdin = strings.NewReader(stdin)
	b, err := cmd.CombinedOutput()
	s.assertNoSecretsExcept(command, string(b))
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, tail(string(b)))
	}
	return string(b)
}

// kubectl runs kubectl against the local cluster; it must succeed.
func (s *stack) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = s.shellEnv()
	cmd.Stdin = strings.NewReader(stdin)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, tail(string(b)))
	}
	return string(b)
}

// background starts a printed long-running command (a port-forward) and returns its stop.
func (s *stack) background(t *testing.T, command string) func() {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+command)
	cmd.Dir = repoRoot
	cmd.Env = s.shellEnv()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Logf("%s: %s", strings.Fields(command)[0], sc.Text())
		}
	}()
	return func() { cmd.Process.Kill(); cmd.Wait() }
}

// assertNoSecretsExcept: a printed command's output holds no secret, except the one secret the
// command exists to show (the Jupyter password command).
func (s *stack) assertNoSecretsExcept(command, text string) {
	if strings.Contains(command, "--show-secrets") {
		return
	}
	s.assertNoSecrets("output of "+command, text)
}

// baseURL is the scheme://host:port of a URL.
func baseURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "/"); j >= 0 {
			return u[:i+3+j]
		}
	}
	return u
}

// readFile returns a file's content (relative to this package).
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
