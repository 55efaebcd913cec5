// Command scale measures how Kolotoc's deploy scales with the ring's size, side by side with the
// floor: for each N it deploys N ranks (N/8 towers of 8 GPUs) on N/8 simulated 8-GPU nodes,
// plus the rest of the GPU layout of examples/gpu-dev (a CPU node, a carrier, sentinels, the
// entrypoint with Jupyter, TensorBoard and the dashboard), through the real `pulumi up`, then
// the same objects by `kubectl apply --server-side` followed by a wait for their readiness.
// It prints, per N: both times and their ratio, the registered resources (and how many are
// node pools), the size of the stack's outputs, and the times of `pulumi destroy` (what `make down`
// runs) and of the floor's `kubectl delete`.
//
//	make bench-scale [SIZES=128,1024,4096] [QUEUE=1]
//	go run ./bench/scale [-sizes 128,1024,4096] [-runs 5] [-queue]
//	    (after eval "$(testbed/stack/stack.sh env)", cluster up)
//
// With -queue the stack queues its ring through Kueue (kolotoc:queue type kueue, the local
// cluster's Kueue): `pulumi up` then does not await the towers (a queued ring may wait for
// admission), so "up" is measured to the towers' StatefulSet ready (`kubectl rollout status`
// after the up): what the admission adds shows side by side with a run without -queue.
//
// With -runs N each size is measured N times over (a row per run), and a summary gives every
// run's up/floor ratio with their median: on a shared 2-core machine one run's ratio can be off
// by half either way (the floor alone varies from 1.7 s to 3.5 s at 128 ranks).
//
// Each size is a throw-away stack bench-<N> (cmd/throwaway: its own backend and passphrase under
// .kolotoc/bench/, throw-away secrets) in namespace kolotoc-bench-<N>; it is destroyed before
// the floor runs, and the floor's objects are deleted afterwards. The log of the last run is
// .kolotoc/bench/scale.log. Nothing of the project's own stacks is read or changed.
//
// What each figure is:
//   - up: `pulumi up --yes --skip-preview` of the new stack (the program's run, every provider
//     call and every readiness wait of the real Kubernetes provider);
//     a warm-up preview runs first, so that the figure holds no build of the program.
//   - floor: the objects `pulumi up` applied (from the stack's state, in its dependency order)
//     given to one `kubectl apply --server-side`, then `kubectl rollout status` of every
//     Deployment, StatefulSet and DaemonSet and `kubectl wait` of every Job the provider awaits,
//     concurrently; from the apply's start to the last ready.
//   - no-change preview: `pulumi preview` of the deployed stack (what a CI preview costs at N).
//   - destroy: `pulumi destroy --yes`, as `make down` runs it (down to the last Node gone: a
//     SimulatedNodePool is deleted in the foreground, after its Nodes).
//
// The simulated nodes are made by the local cluster's pool controller (testbed/cluster/simpool)
// from one SimulatedNodePool object per pool, in the floor as under Pulumi, as a cloud makes a node
// pool's nodes: both sides wait for the pools' Ready condition.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"kolotoc/cmd/throwaway"
	"kolotoc/components/meta"
	"kolotoc/components/ring"
)

// gpusPerNode: the simulated machine (a2-highgpu-8g) and the tower (one rank per GPU).
const gpusPerNode = 8

func main() {
	sizes := flag.String("sizes", "128,1024,4096", "ranks per run, comma-separated (multiples of 8)")
	runs := flag.Int("runs", 1, "measures of each size (their median ratio is printed after the table)")
	flag.BoolVar(&queued, "queue", false, "queue the ring through Kueue (kolotoc:queue); up is measured to the towers ready")
	flag.Parse()
	ns, err := parseSizes(*sizes)
	if err == nil && *runs < 1 {
		err = fmt.Errorf("-runs: %d, want 1 or more", *runs)
	}
	if err == nil {
		err = run(ns, *runs, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < gpusPerNode || n%gpusPerNode != 0 {
			return nil, fmt.Errorf("-sizes: %q is not a multiple of %d ranks", f, gpusPerNode)
		}
		out = append(out, n)
	}
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench/scale %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Result is one size's figures.
type Result struct {
	Ranks, Nodes              int
	Resources, NodeResources  int
	OutputBytes               int
	Up, Floor                 time.Duration
	Preview, Destroy, FloorRm time.Duration
	FloorApply                time.Duration // of Floor: the apply alone (the rest is the wait)
	Objects                   int           // Kubernetes objects applied (the floor's apply)
}

// Ratio is up over floor.
func (r Result) Ratio() float64 { return r.Up.Seconds() / r.Floor.Seconds() }

func run(sizes []int, runs int, out io.Writer) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "Pulumi.yaml")); err != nil {
		return fmt.Errorf("run it from the project directory (where Pulumi.yaml is): %w", err)
	}
	kubeconfig := os.Getenv("KOLOTOC_KUBECONFIG")
	if kubeconfig == "" {
		return errors.New("KOLOTOC_KUBECONFIG is not set: run it as `make bench-scale`, or after eval \"$(testbed/stack/stack.sh env)\"")
	}
	for _, tool := range []string{"pulumi", "kubectl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not on PATH: run it as `make bench-scale`", tool)
		}
	}
	k := kubectl{kubeconfig: kubeconfig}
	if _, err := k.run("", "get", "--raw", "/readyz"); err != nil {
		return fmt.Errorf("the local cluster is not up (%s): start it with `make cluster`", kubeconfig)
	}
	dir := filepath.Join(root, ".kolotoc", "bench")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "scale.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	k.log = logFile

	var results []Result
	for _, n := range sizes {
		for i := 0; i < runs; i++ {
			st := &throwaway.Stack{Root: root, Dir: filepath.Join(dir, fmt.Sprintf("bench-%d", n)),
				Name: fmt.Sprintf("bench-%d", n), Log: logFile,
				Description: "bench/scale's throw-away stack, destroyed after the measure"}
			r, err := measure(st, k, n, kubeconfig)
			if err != nil {
				return fmt.Errorf("N=%d: %w (log: %s)", n, err, logFile.Name())
			}
			results = append(results, r)
			logf("N=%d: up %s, floor %s (×%.2f), %d resources, destroy %s", n, secs(r.Up), secs(r.Floor), r.Ratio(), r.Resources, secs(r.Destroy))
		}
	}
	Table(out, results)
	if runs > 1 {
		fmt.Fprintln(out)
		Summary(out, results)
	}
	return nil
}

// Summary prints, per size measured more than once, every run's up/floor ratio and the medians
// of the ratio, of pulumi up and of the floor.
func Summary(w io.Writer, rs []Result) {
	var sizes []int
	bySize := map[int][]Result{}
	for _, r := range rs {
		if _, ok := bySize[r.Ranks]; !ok {
			sizes = append(sizes, r.Ranks)
		}
		bySize[r.Ranks] = append(bySize[r.Ranks], r)
	}
	for _, n := range sizes {
		runs := bySize[n]
		var ratios, ups, floors []float64
		var each []string
		for _, r := range runs {
			ratios = append(ratios, r.Ratio())
			ups = append(ups, r.Up.Seconds())
			floors = append(floors, r.Floor.Seconds())
			each = append(each, fmt.Sprintf("%.2f", r.Ratio()))
		}
		fmt.Fprintf(w, "N=%d, %d runs: up/floor %s; median %.2f (pulumi up %.1f s, floor %.1f s)\n",
			n, len(runs), strings.Join(each, " "), median(ratios), median(ups), median(floors))
	}
}

// median of a non-empty list (the mean of the middle two when their number is even).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Config is the bench stack's Pulumi.<stack>.yaml for n ranks: examples/gpu-dev's layout with
// n/8 towers on n/8 nodes.
// queued: -queue, the ring queued through Kueue.
var queued bool

func Config(n int, kubeconfig string) ([]byte, error) {
	nodes := n / gpusPerNode
	cfg := map[string]any{
		"kolotoc:cloud":   "simulated",
		"kolotoc:cluster": map[string]any{"name": fmt.Sprintf("bench-%d", n), "kubeconfig": kubeconfig},
		"kolotoc:nodePools": []any{
			map[string]any{"name": "gpu", "nodes": nodes, "machineType": "a2-highgpu-8g", "gpusPerNode": gpusPerNode,
				"gpuType": "nvidia-tesla-a100", "cpus": 96, "memory": "680Gi"},
			map[string]any{"name": "cpu", "nodes": 1, "machineType": "n2-standard-16", "cpus": 16, "memory": "64Gi"},
		},
		"kolotoc:towers":     map[string]any{"count": nodes, "gpusPerTower": gpusPerNode, "pool": "gpu"},
		"kolotoc:carriers":   map[string]any{"count": 1, "pool": "cpu"},
		"kolotoc:sentinels":  map[string]any{"enabled": true},
		"kolotoc:entrypoint": map[string]any{"jupyter": true, "tensorboard": true, "daskDashboard": true},
	}
	if queued {
		cfg["kolotoc:queue"] = map[string]any{"type": "kueue"}
	}
	return yaml.Marshal(map[string]any{"config": cfg})
}

func measure(st *throwaway.Stack, k kubectl, n int, kubeconfig string) (Result, error) {
	r := Result{Ranks: n, Nodes: n/gpusPerNode + 1}
	if st.Exists() { // an interrupted run's stack
		logf("N=%d: destroying what an interrupted run left", n)
		if err := st.Destroy(); err != nil {
			return r, err
		}
	}
	if err := st.Remove(); err != nil {
		return r, err
	}
	cfg, err := Config(n, kubeconfig)
	if err != nil {
		return r, err
	}
	secrets := map[string]string{}
	for _, key := range []string{"kolotoc:jupyterPassword", "kolotoc:sshKeySeed"} {
		if secrets[key], err = throwaway.RandomHex(32); err != nil {
			return r, err
		}
	}
	if err := st.Create(cfg, secrets); err != nil {
		return r, err
	}
	defer func() { _ = st.Destroy(); _ = st.Remove() }()

	logf("N=%d: warm-up preview (builds the program once)", n)
	if out, err := st.Pulumi("", "preview"); err != nil {
		return r, fmt.Errorf("pulumi preview: %w\n%s", err, throwaway.Tail(out, 20))
	}
	logf("N=%d: pulumi up (%d nodes, %d towers)", n, r.Nodes, n/gpusPerNode)
	var out string
	if r.Up, out, err = timed(st, "up", "--yes", "--skip-preview"); err != nil {
		return r, fmt.Errorf("pulumi up: %w\n%s", err, throwaway.Tail(out, 30))
	}
	if queued { // the towers are not awaited: up is measured to their admission and readiness
		start := time.Now()
		if out, err := k.run("", "-n", "kolotoc-"+st.Name, "rollout", "status", "statefulset/"+ring.Name, "--timeout=20m"); err != nil {
			return r, fmt.Errorf("the queued towers never got ready: %w\n%s", err, out)
		}
		logf("N=%d: queued towers ready %s after the up", n, secs(time.Since(start)))
		r.Up += time.Since(start)
	}

	logf("N=%d: no-change preview", n)
	start := time.Now()
	out, err = st.Pulumi("", "preview", "--expect-no-changes")
	if err != nil {
		return r, fmt.Errorf("the no-change preview: %w\n%s", err, throwaway.Tail(out, 30))
	}
	r.Preview = time.Since(start)
	outputs, err := st.Pulumi("", "stack", "output", "--json")
	if err != nil {
		return r, fmt.Errorf("pulumi stack output: %w", err)
	}
	r.OutputBytes = len(outputs)
	// The export holds the stack's secrets in plain text (it feeds the floor the same Secrets):
	// it is kept in memory only, out of the log, and the stack is a throw-away one.
	export, err := st.Quiet("", "stack", "export", "--show-secrets")
	if err != nil {
		return r, fmt.Errorf("pulumi stack export: %w", err)
	}
	state, err := ParseState(export)
	if err != nil {
		return r, err
	}
	r.Resources, r.NodeResources, r.Objects = state.Resources, state.NodeResources, len(state.Objects)
	if state.Nodes != r.Nodes {
		return r, fmt.Errorf("the stack asks for %d simulated nodes, want %d", state.Nodes, r.Nodes)
	}

	logf("N=%d: pulumi destroy", n)
	if r.Destroy, out, err = timed(st, "destroy", "--yes"); err != nil {
		return r, fmt.Errorf("pulumi destroy: %w\n%s", err, throwaway.Tail(out, 20))
	}

	logf("N=%d: the floor: kubectl apply --server-side of the same %d objects, then their readiness", n, len(state.Objects))
	manifest, err := state.Manifest()
	if err != nil {
		return r, err
	}
	workloads, nodes, err := state.Split()
	if err != nil {
		return r, err
	}
	// The floor's delete: what runs on the nodes first, then the nodes (deleted together, a pod
	// whose node is gone waits for the pod garbage collector, which takes a minute or more). In
	// the foreground, as the provider deletes: done when the pods and the pools' Nodes are gone.
	remove := func(ignoreMissing bool) error {
		for _, m := range [][]byte{workloads, nodes} {
			if len(m) == 0 {
				continue
			}
			args := []string{"delete", "--wait", "--cascade=foreground", "-f", "-"}
			if ignoreMissing {
				args = append(args, "--ignore-not-found")
			}
			if _, err := k.run(string(m), args...); err != nil {
				return err
			}
		}
		return nil
	}
	defer func() { _ = remove(true) }()
	start = time.Now()
	if _, err := k.run(string(manifest), "apply", "--server-side", "--field-manager", "bench-floor", "-f", "-"); err != nil {
		return r, fmt.Errorf("the floor's apply: %w", err)
	}
	r.FloorApply = time.Since(start)
	if err := k.waitAll(state.Awaited); err != nil {
		return r, fmt.Errorf("the floor's wait: %w", err)
	}
	r.Floor = time.Since(start)
	start = time.Now()
	if err := remove(false); err != nil {
		return r, fmt.Errorf("the floor's delete: %w", err)
	}
	r.FloorRm = time.Since(start)
	return r, nil
}

// State is what the floor needs of a stack's state.
type State struct {
	Resources     int              // every registered resource (the stack, providers, components, objects)
	NodeResources int              // of which Nodes and SimulatedNodePools
	Nodes         int              // the simulated nodes those stand for
	Objects       []map[string]any // the Kubernetes objects, in the state's (dependency) order
	Awaited       []Awaited        // the objects the provider waits for, that kubectl can wait for too
}

// Awaited is one object the floor waits for: its rollout, or Condition when set.
type Awaited struct{ Kind, Namespace, Name, Condition string }

// ParseState reads `pulumi stack export`'s deployment: the resources and, for each Kubernetes
// object, its inputs (the object as applied, without the provider's __ fields).
func ParseState(export []byte) (*State, error) {
	var doc struct {
		Deployment struct {
			Resources []struct {
				Type     string         `json:"type"`
				Custom   bool           `json:"custom"`
				External bool           `json:"external"` // read, not applied (the queue's check of Kueue's CRD)
				Inputs   map[string]any `json:"inputs"`
			} `json:"resources"`
		} `json:"deployment"`
	}
	if err := json.Unmarshal(export, &doc); err != nil {
		return nil, fmt.Errorf("pulumi stack export: %w", err)
	}
	s := &State{Resources: len(doc.Deployment.Resources)}
	for _, res := range doc.Deployment.Resources {
		if !res.Custom || res.External || !strings.HasPrefix(res.Type, "kubernetes:") {
			continue
		}
		obj := map[string]any{}
		for k, v := range res.Inputs {
			if !strings.HasPrefix(k, "__") {
				plain, err := unwrapSecrets(v)
				if err != nil {
					return nil, fmt.Errorf("resource of type %s, input %s: %w", res.Type, k, err)
				}
				obj[k] = plain
			}
		}
		kind, _ := obj["kind"].(string)
		if kind == "" {
			return nil, fmt.Errorf("resource of type %s has no kind in its inputs", res.Type)
		}
		switch kind {
		case "Node":
			s.NodeResources++
			s.Nodes++
		case "SimulatedNodePool":
			s.NodeResources++
			spec, _ := obj["spec"].(map[string]any)
			n, _ := spec["nodes"].(float64)
			s.Nodes += int(n)
		}
		s.Objects = append(s.Objects, obj)
		md, _ := obj["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		namespace, _ := md["namespace"].(string)
		ann, _ := md["annotations"].(map[string]any)
		if skip, _ := ann[meta.SkipAwaitAnnotation].(string); skip == "true" {
			continue
		}
		if wf, _ := ann[meta.WaitForAnnotation].(string); strings.HasPrefix(wf, "condition=") {
			s.Awaited = append(s.Awaited, Awaited{Kind: kind, Namespace: namespace, Name: name, Condition: wf})
			continue
		}
		switch kind {
		case "Deployment", "StatefulSet", "DaemonSet", "Job":
			s.Awaited = append(s.Awaited, Awaited{Kind: kind, Namespace: namespace, Name: name})
		}
	}
	if len(s.Objects) == 0 {
		return nil, errors.New("the stack's state holds no Kubernetes object")
	}
	return s, nil
}

// secretSig marks a secret value in a Pulumi checkpoint: {secretSig: secretSigValue,
// "plaintext": <the value, JSON-encoded>} (with --show-secrets; "ciphertext" without).
const (
	secretSig      = "4dabf18193072939515e22adb298388d"
	secretSigValue = "1b47061264138c4ac30d75fd1eb44270"
)

// unwrapSecrets replaces every secret envelope in v by its plaintext value.
func unwrapSecrets(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if t[secretSig] == secretSigValue {
			p, ok := t["plaintext"].(string)
			if !ok {
				return nil, errors.New("a secret without its plaintext (the export needs --show-secrets)")
			}
			var plain any
			if err := json.Unmarshal([]byte(p), &plain); err != nil {
				return nil, fmt.Errorf("a secret's plaintext: %w", err)
			}
			return unwrapSecrets(plain)
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			u, err := unwrapSecrets(e)
			if err != nil {
				return nil, err
			}
			out[k] = u
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			u, err := unwrapSecrets(e)
			if err != nil {
				return nil, err
			}
			out[i] = u
		}
		return out, nil
	}
	return v, nil
}

// Manifest is the objects as one YAML stream, in the state's order (namespaces and nodes before
// what lives in them).
func (s *State) Manifest() ([]byte, error) {
	var b bytes.Buffer
	for _, o := range s.Objects {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

// Split is Manifest in two: every object but the nodes, and the nodes (Nodes and their pools).
func (s *State) Split() (others, nodes []byte, err error) {
	var o, n State
	for _, obj := range s.Objects {
		if obj["kind"] == "Node" || obj["kind"] == "SimulatedNodePool" {
			n.Objects = append(n.Objects, obj)
		} else {
			o.Objects = append(o.Objects, obj)
		}
	}
	if others, err = o.Manifest(); err != nil {
		return nil, nil, err
	}
	nodes, err = n.Manifest()
	return others, nodes, err
}

// Table prints the results as a Markdown table.
func Table(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| ranks | nodes | resources (of which node pools) | objects | outputs (bytes) | pulumi up | floor: apply + ready | up / floor | no-change preview | pulumi destroy | floor delete |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %d | %d | %d (%d) | %d | %d | %s | %s + %s | %.2f | %s | %s | %s |\n",
			r.Ranks, r.Nodes, r.Resources, r.NodeResources, r.Objects, r.OutputBytes,
			secs(r.Up), secs(r.FloorApply), secs(r.Floor-r.FloorApply), r.Ratio(), secs(r.Preview), secs(r.Destroy), secs(r.FloorRm))
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// timed runs a pulumi command and returns how long it took. Its lines are stamped in the log
// with the time since its start: where the time goes (each resource's "creating" and "created").
func timed(st *throwaway.Stack, args ...string) (time.Duration, string, error) {
	start := time.Now()
	plain := st.Log
	st.Log = &stamped{w: plain, start: start}
	defer func() { st.Log = plain }()
	out, err := st.Pulumi("", args...)
	return time.Since(start), out, err
}

// stamped prefixes every line with the seconds since start.
type stamped struct {
	w       io.Writer
	start   time.Time
	midLine bool
}

func (s *stamped) Write(p []byte) (int, error) {
	var b bytes.Buffer
	for _, c := range p {
		if !s.midLine {
			fmt.Fprintf(&b, "[%6.1fs] ", time.Since(s.start).Seconds())
		}
		b.WriteByte(c)
		s.midLine = c != '\n'
	}
	_, err := s.w.Write(b.Bytes())
	return len(p), err
}

// kubectl runs kubectl on the local cluster.
type kubectl struct {
	kubeconfig string
	log        io.Writer
}

func (k kubectl) run(stdin string, args ...string) (string, error) {
	args = append([]string{"--kubeconfig", k.kubeconfig}, args...)
	cmd := exec.Command("kubectl", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if k.log != nil {
		// kubectl apply and delete print one line per object, never its content.
		fmt.Fprintf(k.log, "\n$ kubectl %s\n%s", strings.Join(args, " "), out.String())
	}
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, throwaway.Tail(out.String(), 10))
	}
	return out.String(), nil
}

// waitAll waits for every awaited object at once: rollout status for workloads, condition
// complete for Jobs.
func (k kubectl) waitAll(objs []Awaited) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(objs))
	for _, o := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := strings.ToLower(o.Kind) + "/" + o.Name
			var args []string
			if o.Namespace != "" {
				args = []string{"-n", o.Namespace}
			}
			switch {
			case o.Condition != "":
				args = append(args, "wait", "--for="+o.Condition, ref, "--timeout=30m")
			case o.Kind == "Job":
				args = append(args, "wait", "--for=condition=complete", ref, "--timeout=30m")
			default:
				args = append(args, "rollout", "status", ref, "--timeout=30m")
			}
			if ctx.Err() != nil {
				errs <- ctx.Err()
				return
			}
			if _, err := k.run("", args...); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
