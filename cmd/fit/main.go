// Command fit answers "does this environment fit?" before anything is paid for: `make fit
// STACK=<name>` mirrors the stack's node pools node for node on the local cluster (kwok nodes of
// the machine types' figures; a pool at zero as a Karpenter NodePool that the local cluster's
// Karpenter grows), deploys its workloads there as a throw-away stack, waits until the scheduler
// (and Karpenter) has placed or refused every pod, prints a report with the growth of the
// autoscaled pools (growth.go), and destroys the throw-away stack.
// The stack's own file and state are only read (the file) or never touched (the state).
//
//	make fit STACK=<stack name | path of a stack file>
//	go run ./cmd/fit [-wait 60s] <stack name | path of a stack file>
//	    (after eval "$(testbed/stack/stack.sh env)")
//
// A stack name is Pulumi.<name>.yaml in the project, else examples/<name>/Pulumi.<name>.yaml.
// Exit status: 0 every pod placed; 1 it does not fit (pods Pending, the program refuses the
// configuration, or the growth refuses a workload: GPU pods beyond a pool's maxNodes, a gang
// beyond its queue's quota); 2 the check could not run (no local cluster, no Karpenter for a pool
// at zero, no tools, a failed deploy).
//
// The environment is `testbed/stack/stack.sh env`'s: pulumi and its plugins on PATH,
// KOLOTOC_KUBECONFIG. Everything the check writes lives under .kolotoc/fit/ and is removed
// afterwards, but for the log of its last run (.kolotoc/fit/<mirror>.log).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"kolotoc/cmd/throwaway"
)

// Exit statuses.
const (
	exitFits     = 0
	exitNoFit    = 1
	exitCannot   = 2
	exitSignaled = 130
)

// defaultWait: how long the scheduler gets to decide every pod after pulumi up. It decides
// within a second or two on the local cluster; controllers create the pods first.
const defaultWait = 60 * time.Second

// karpenterCleanup: how long the clean-up waits for Karpenter to delete the nodes it made for a
// pool at zero once the mirror is destroyed (it drains and deletes them within seconds).
const karpenterCleanup = 60 * time.Second

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "[fit] "+format+"\n", args...) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wait := fs.Duration("wait", defaultWait, "how long the scheduler gets to decide every pod")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: go run ./cmd/fit [-wait 60s] <stack name | stack file>   (make fit STACK=<name>)")
		return exitCannot
	}
	root, err := os.Getwd()
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "Pulumi.yaml"))
	}
	if err != nil {
		fmt.Fprintf(stderr, "fit: run it from the project directory (where Pulumi.yaml is): %v\n", err)
		return exitCannot
	}
	stack, source, err := resolve(root, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "fit: %v\n", err)
		return exitCannot
	}
	kubeconfig := os.Getenv("KOLOTOC_KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(root, ".kolotoc", "kubeconfig")
	}
	if kubeconfig, err = filepath.Abs(kubeconfig); err != nil {
		fmt.Fprintf(stderr, "fit: %v\n", err)
		return exitCannot
	}
	kube, err := connect(kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "fit: %s\n", clusterDown(kubeconfig, err))
		return exitCannot
	}
	if err := poolsServed(kube); err != nil {
		fmt.Fprintf(stderr, "fit: %v\n", err)
		return exitCannot
	}
	if _, err := exec.LookPath("pulumi"); err != nil {
		fmt.Fprintln(stderr, "fit: pulumi is not on PATH: run it as `make fit` (or after `eval \"$(testbed/stack/stack.sh env)\"`), once `make tools` has built it")
		return exitCannot
	}
	src, err := os.ReadFile(filepath.Join(root, source))
	if err != nil {
		fmt.Fprintf(stderr, "fit: %v\n", err)
		return exitCannot
	}
	// The stack as its own cloud would take it, before anything is mirrored: a stack that `pulumi
	// up` would refuse does not fit anywhere (the mirror, simulated, would not refuse it).
	if err := validateAsItsCloud(root, source, stack, stderr); err != nil {
		fmt.Fprintf(stderr, "fit: %s: %v\n", source, err)
		return exitCannot
	}
	m, err := NewMirror(stack, src, kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "fit: %s: %v\n", source, err)
		return exitCannot
	}
	if zero := m.FromZero(); len(zero) > 0 {
		if err := karpenterServed(kube, zero); err != nil {
			fmt.Fprintf(stderr, "fit: %v\n", err)
			return exitCannot
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &check{root: root, m: m, kube: kube, out: stdout, errw: stderr}
	c.dir = filepath.Join(root, ".kolotoc", "fit", m.Name)
	c.st = &throwaway.Stack{Root: root, Dir: c.dir, Name: m.Name,
		Description: fmt.Sprintf("make fit's throw-away mirror of stack %s (cmd/fit), destroyed after the check", m.Stack)}
	if err := c.lock(); err != nil {
		fmt.Fprintf(stderr, "fit: %v\n", err)
		return exitCannot
	}
	defer c.unlock()

	code := c.check(ctx, stack, source, *wait)
	defer func() {
		if c.log != nil {
			_ = c.log.Close()
		}
	}()
	if ctx.Err() != nil {
		logf("interrupted: cleaning up")
	}
	if err := c.cleanup(context.Background()); err != nil {
		fmt.Fprintf(stderr, "fit: clean-up of %s failed: %v (log: %s)\n", m.Name, err, c.logPath())
		return exitCannot
	}
	if ctx.Err() != nil {
		return exitSignaled
	}
	return code
}

// stackFileName: Pulumi.<stack>.yaml.
var stackFileName = regexp.MustCompile(`^Pulumi\.([^/]+)\.ya?ml$`)

// resolve finds a stack's file: a path, Pulumi.<name>.yaml in the project, or
// examples/<name>/Pulumi.<name>.yaml; it returns the stack's name and the file relative to root.
func resolve(root, arg string) (stack, rel string, err error) {
	if strings.ContainsRune(arg, '/') || strings.HasSuffix(arg, ".yaml") {
		abs, err := filepath.Abs(arg)
		if err != nil {
			return "", "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", "", err
		}
		m := stackFileName.FindStringSubmatch(filepath.Base(abs))
		if m == nil {
			return "", "", fmt.Errorf("%s: a stack file is named Pulumi.<stack>.yaml", arg)
		}
		if rel, err = filepath.Rel(root, abs); err != nil || strings.HasPrefix(rel, "..") {
			rel = abs
		}
		return m[1], rel, nil
	}
	for _, rel := range []string{"Pulumi." + arg + ".yaml", filepath.Join("examples", arg, "Pulumi."+arg+".yaml")} {
		if _, err := os.Stat(filepath.Join(root, rel)); err == nil {
			return arg, rel, nil
		}
	}
	return "", "", fmt.Errorf("no stack %s: neither Pulumi.%s.yaml nor examples/%s/Pulumi.%s.yaml exists", arg, arg, arg, arg)
}

// check is one run of make fit.
type check struct {
	root, dir string
	st        *throwaway.Stack
	m         *Mirror
	kube      *kubernetes.Clientset
	out, errw io.Writer
	log       *os.File
	deployed  bool // the throw-away stack exists and may hold resources
}

func (c *check) logPath() string  { return c.dir + ".log" }
func (c *check) lockPath() string { return c.dir + ".lock" }

// lock keeps two runs from sharing one mirror; a lock left by a run that died is taken over.
func (c *check) lock() error {
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o700); err != nil {
		return err
	}
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(c.lockPath(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = fmt.Fprint(f, os.Getpid())
			_ = f.Close()
			return err
		}
		b, _ := os.ReadFile(c.lockPath())
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("another make fit of stack %s is running (pid %d, lock %s)", c.m.Stack, pid, c.lockPath())
		}
		_ = os.Remove(c.lockPath())
	}
	return fmt.Errorf("cannot take the lock %s", c.lockPath())
}

func (c *check) unlock() { _ = os.Remove(c.lockPath()) }

func (c *check) namespaces() []string { return c2ns(c.m) }

// check deploys the mirror, waits for the scheduler and prints the report; it returns the exit
// status. Clean-up is the caller's.
func (c *check) check(ctx context.Context, stack, source string, wait time.Duration) int {
	var err error
	if c.log, err = os.Create(c.logPath()); err != nil {
		fmt.Fprintf(c.errw, "fit: %v\n", err)
		return exitCannot
	}
	c.st.Log = c.log
	if _, err := os.Stat(c.dir); err == nil {
		logf("a fit of %s was interrupted before it cleaned up: removing what it left", stack)
		c.deployed = true
		if err := c.cleanup(ctx); err != nil {
			fmt.Fprintf(c.errw, "fit: removing the leftovers of %s failed: %v (log: %s)\n", c.m.Name, err, c.logPath())
			return exitCannot
		}
	}
	if err := c.prepare(ctx); err != nil {
		fmt.Fprintf(c.errw, "fit: %v (log: %s)\n", err, c.logPath())
		return exitCannot
	}

	r := &Report{Stack: stack, Source: source, Mirror: c.m.Name, Notes: c.m.Notes}
	nodes := 0
	for _, p := range c.m.Pools {
		nodes += p.Nodes
	}
	logf("%s: pulumi up of %s (%d simulated nodes) on the local cluster", stack, c.m.Name, nodes)
	start := time.Now()
	out, err := c.st.Pulumi("", "up", "--yes", "--skip-preview")
	r.Deploy = time.Since(start)
	if err != nil {
		if refused := configProblems(out); refused != "" {
			r.Refused = refused
			r.Write(c.out)
			return r.ExitCode()
		}
		if ctx.Err() == nil { // an interrupted update says why itself
			fmt.Fprintf(c.errw, "fit: pulumi up of %s failed: %v\n%s\n(log: %s)\n", c.m.Name, err, throwaway.Tail(out, 30), c.logPath())
		}
		return exitCannot
	}
	if r.Growth, err = c.growth(); err != nil {
		fmt.Fprintf(c.errw, "fit: %v (log: %s)\n", err, c.logPath())
		return exitCannot
	}
	logf("waiting for the scheduler (at most %s)", wait)
	start = time.Now()
	snap, err := waitForScheduler(ctx, c.kube, c.namespaces(), c.m.FromZero(), wait)
	r.Decide = time.Since(start)
	if err != nil {
		fmt.Fprintf(c.errw, "fit: %v\n", err)
		return exitCannot
	}
	if err := collect(ctx, c.kube, c.m, snap, r); err != nil {
		fmt.Fprintf(c.errw, "fit: %v\n", err)
		return exitCannot
	}
	r.Write(c.out)
	return r.ExitCode()
}

// growth reads the growth the program computed for the mirror (stacks/growth.go).
func (c *check) growth() (*Growth, error) {
	out, err := c.st.Quiet("", "stack", "output", "--json", growthOutput)
	if err != nil {
		return nil, fmt.Errorf("pulumi stack output %s of %s: %w", growthOutput, c.m.Name, err)
	}
	return parseGrowth(out)
}

// prepare creates the mirror's throw-away stack (its own project directory naming the program,
// its config file, backend and passphrase) with throw-away secrets.
func (c *check) prepare(ctx context.Context) error {
	cfg, err := c.m.ConfigFile()
	if err != nil {
		return err
	}
	c.deployed = true // from here on a failure may leave a stack to destroy
	return c.st.Create(cfg, c.m.Secrets)
}

// cleanup destroys the mirror, removes its stack and directory, and checks that none of its nodes
// and namespaces are left in the cluster.
func (c *check) cleanup(ctx context.Context) error {
	if c.deployed {
		if c.st.Exists() {
			logf("destroying %s", c.m.Name)
			// Its namespaces start terminating now, while pulumi walks the dependency chain
			// down to them: the destroy then waits for them once, not one after the other.
			startDeletingNamespaces(ctx, c.kube, c.namespaces())
			if err := c.st.Destroy(); err != nil {
				return err
			}
		}
		c.deployed = false
	}
	if err := c.st.Remove(); err != nil {
		return err
	}
	left, err := leftovers(ctx, c.kube, c.m, c.namespaces())
	// Karpenter deletes a pool at zero's nodes after its NodePool is gone, a few seconds later.
	for deadline := time.Now().Add(karpenterCleanup); err == nil && len(left) > 0 && len(c.m.FromZero()) > 0 && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		left, err = leftovers(ctx, c.kube, c.m, c.namespaces())
	}
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("still in the cluster after destroy: %s (remove them with kubectl delete)", strings.Join(left, " "))
	}
	return nil
}

// configProblems extracts the program's refusal of a configuration from pulumi's output: the
// line counting the problems and one line per problem, each naming its key.
func configProblems(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "configuration problem(s)") {
			continue
		}
		head := strings.TrimSpace(l)
		if j := strings.Index(head, "stack "); j >= 0 {
			head = head[j:]
		}
		problems := []string{head}
		for _, p := range lines[i+1:] {
			p = strings.TrimSpace(p)
			if !strings.HasPrefix(p, "- "+ns) {
				break
			}
			problems = append(problems, "  "+p)
		}
		return strings.Join(problems, "\n")
	}
	return ""
}

// validateAsItsCloud runs the program's validate mode (main.go; stacks.ValidateStackFile) on the
// stack file: its problems, as `pulumi up` of the stack itself would report them (its secrets
// aside), go to stderr, and the error says the stack was refused.
func validateAsItsCloud(root, source, stack string, stderr io.Writer) error {
	cmd := exec.Command("go", "run", ".", "validate", filepath.Join(root, source), stack)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("refused as `pulumi up` of stack %s would refuse it (above), so nothing was mirrored: %w", stack, err)
	}
	return nil
}
