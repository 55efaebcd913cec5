package meta

import (
	"errors"
	"fmt"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// RegisterOutputs registers a component's outputs without holding the program up.
//
// The SDK's ctx.RegisterResourceOutputs first waits for the component's URN, that is for the
// component to be registered, which happens only once everything it depends on exists. Called at
// the end of a constructor, it held the whole program there: every resource registered after a
// component that waits for the simulated node pools (the device plugin) waited for those nodes
// too, the towers' Secrets and Services included, so the towers' StatefulSet started late
// (bench/scale). Here that wait happens on a goroutine; WaitOutputs, called once at the end of
// the program, joins them and returns what failed.
func RegisterOutputs(ctx *pulumi.Context, c pulumi.ComponentResource, outs pulumi.Map) error {
	p := pendingOf(ctx)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := ctx.RegisterResourceOutputs(c, outs); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, err)
			p.mu.Unlock()
		}
	}()
	return nil
}

// WaitOutputs waits for the outputs RegisterOutputs registers on ctx; the program must call it
// before it returns, or the last components' outputs may never reach the engine.
func WaitOutputs(ctx *pulumi.Context) error {
	pending.Lock()
	p := pending.of[ctx]
	delete(pending.of, ctx)
	pending.Unlock()
	if p == nil {
		return nil
	}
	p.wg.Wait()
	return errors.Join(p.errs...)
}

type outputs struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

var pending = struct {
	sync.Mutex
	of map[*pulumi.Context]*outputs
}{of: map[*pulumi.Context]*outputs{}}

func pendingOf(ctx *pulumi.Context) *outputs {
	pending.Lock()
	defer pending.Unlock()
	p := pending.of[ctx]
	if p == nil {
		p = &outputs{}
		pending.of[ctx] = p
	}
	return p
}

// PodIndex is how a printed command names the pod of index N of a StatefulSet: `<set>-${N:-0}`,
// expanded by the user's shell, so that one output reaches any rank (the old `cluster.sh goto
// tower N`) and the outputs do not grow with the number of ranks. Run such a command with
// `N=3 eval "$(pulumi stack output <output>)"`; without N it names pod 0. Each set's count is an
// output beside it.
const PodIndex = "${N:-0}"

// TaskVar is how a printed command names a task type the user picks, `${TASK:-<default>}`, as
// PodIndex names the index.
func TaskVar(def string) string { return "${TASK:-" + def + "}" }

// Endpoint is one user-facing service of a component, as users reach it.
type Endpoint struct {
	URL      string // in-cluster URL
	LocalURL string // URL once the port-forward runs
	// PortForwardArgs are the kubectl arguments that make it reachable on localhost
	// (`-n <ns> port-forward svc/<name> <port>:<port>`); the stack binds kubectl to its cluster.
	PortForwardArgs string
}

// ServiceEndpoint is the endpoint of port on the Service svc of namespace, path on it.
func ServiceEndpoint(scheme, svc, namespace string, port int, path string) Endpoint {
	return Endpoint{
		URL:             fmt.Sprintf("%s://%s.%s.svc:%d%s", scheme, svc, namespace, port, path),
		PortForwardArgs: fmt.Sprintf("-n %s port-forward svc/%s %d:%d", namespace, svc, port, port),
		LocalURL:        fmt.Sprintf("%s://localhost:%d%s", scheme, port, path),
	}
}

// Outputs adds the endpoint's stack outputs to out under name: <name>Url, <name>PortForward (a
// kubectl command line for the stack's cluster) and <name>LocalUrl.
func (ep Endpoint) Outputs(out pulumi.Map, name string, kubectl func(format string, a ...any) pulumi.StringOutput) {
	out[name+"Url"] = pulumi.String(ep.URL)
	out[name+"PortForward"] = kubectl("%s", ep.PortForwardArgs)
	out[name+"LocalUrl"] = pulumi.String(ep.LocalURL)
}
