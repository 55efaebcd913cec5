package stacks

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/entrypoint"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
)

// The workloads, registered once. Each declares its whole entry in its own file
// (workload_<key>.go, beside its package in components/), which registers it: how its section
// starts, the defaults it takes from the node pools and from the workloads before it, its checks
// in the stack's context, the facts other checks need of it (its pools, its GPU pods, its env, its
// gang), and how it is deployed, allowed and reported. The stack's phases iterate the entries
// (load.go, defaults.go, validate.go, deploy.go and the features: runs, runas, security, queue,
// clouds); none names the workloads again. Adding a workload is its package, its file and its
// section's field in Config (config.go), the one list of the workloads.

// workloads in the order every phase takes them, which is the order of their sections' fields
// in Config: pool defaults (a workload may take from the ones before it: the entrypoint its pool
// from the carriers'; the other defaults follow every pool default, so the towers' launcher, the
// data-in Job and the monitoring take the entrypoint's pool whatever the order), checks (problems
// are listed in this order) and deploy (the ones marked first, then the others: etcd before the
// elastic workers that wait for it). Filled by register, from the entry files' init, before any
// phase runs.
var workloads []*workload

// register adds a workload's entry to workloads, at the place of its section's field in Config.
// Its key must be a Config key, and registered once: a mistake here is the program's, found by
// every test, so it panics.
func register(wl *workload) {
	k, ok := configKeys[wl.key]
	if !ok {
		panic(fmt.Sprintf("workload %q: Config has no field tagged key:%q", wl.key, wl.key))
	}
	i, found := slices.BinarySearchFunc(workloads, k.index, func(w *workload, index int) int {
		return cmp.Compare(configKeys[w.key].index, index)
	})
	if found {
		panic(fmt.Sprintf("workload %q registered twice", wl.key))
	}
	workloads = slices.Insert(workloads, i, wl)
}

// workload is one workload's entry. Every function but enabled may be nil: nothing of that kind.
type workload struct {
	key     string               // kolotoc:<key>
	enabled func(c *Config) bool // nil: always on (the entrypoint)

	// preset turns on, before decoding, the switches that default to on; decoding then only
	// turns off what the stack turns off.
	preset func(c *Config)
	// poolDefaults fills what the section takes from the node pools (and from the sections
	// before it, whose pool defaults are in); defaults fills the rest, after every section's
	// pool defaults, the section's own last. Both fill zero values only.
	poolDefaults func(c *Config, pools meta.Pools)
	defaults     func(c *Config)
	onSuccess    func(c *Config) *string // its run policy (runs.go): defaulted and checked

	// check checks the section in the stack's context, whether enabled or not (a section that
	// is off has nothing to check, or a switch that needs another).
	check func(c *Config, v *validator)
	// The facts other checks need of an enabled workload: the pools its pods run on (a noun for
	// messages: "towers"), its GPU pods (validateGPUBudget), its env settings (runs.go), the
	// Secrets it writes (OwnSecrets), the gang its queue admits (queue.go).
	pools   func(c *Config) []poolUse
	gpus    func(c *Config) []gpuDemand
	env     func(c *Config) []envSetting // checked whether enabled or not
	secrets []string
	gang    func(c *Config) *gangNeed

	// The shared store and the pods (runas.go, security.go): the image the store's owner Job
	// may run (a training image, with a shell), the directories it writes under the shared
	// claim, and whether its pods mount the per-pod scratch.
	image   func(c *Config) string
	dirs    func(c *Config) []string
	scratch bool

	// first: registered before the other workloads, which wait for it (the entrypoint, the
	// data-in Job). deploy registers it; allows are its NetworkPolicy allows; outputs its stack
	// outputs.
	first   bool
	deploy  func(ctx *pulumi.Context, c *Config, w *wiring) error
	allows  func(c *Config) []isolation.Allow
	outputs func(c *Config, kube KubeAccess) pulumi.Map
}

// on reports whether the config runs the workload.
func (wl *workload) on(c *Config) bool { return wl.enabled == nil || wl.enabled(c) }

// poolUse is a pool a workload's pods run on, and what they are called in messages.
type poolUse struct{ pool, who string }

// gpuDemand is one workload's GPU pods on a pool.
type gpuDemand struct {
	who        string // config key of the workload
	pods, gpus int    // pods and GPUs per pod
	pool       string
}

// envSetting is one env key of a workload (kolotoc:<workload>.env).
type envSetting struct {
	key string
	env []meta.EnvSetting
}

// gangNeed is what a queued workload asks its queue for at once (queue.go).
type gangNeed struct {
	key, value, what string
	need             map[string]string
}

// wiring is what the stack hands each workload's deploy.
type wiring struct {
	site  meta.Site         // what every workload takes from the stack, its namespace input set
	pools []pulumi.Resource // the simulated node pools: what pods that mount nothing wait for
	// mount: the pools, the shared claim and its owner Job: what pods that mount the claim wait
	// for; the data-in Job adds itself, so that the workloads after it wait for it too.
	mount []pulumi.Resource
	queue []pulumi.Resource // the stack's queue (queue.go): what queued pods also wait for; none without one
	// namespaceUID names this life of the namespace (etcd's static volumes); agents is the GPU
	// agents' namespace (the DCGM exporter's), nil when there is none.
	namespaceUID, agents pulumi.StringInput
	// etcd is the etcd StatefulSet once registered (the elastic workers wait for it): the
	// StatefulSet, not the component, since the SDK adds a child to its component from the
	// child's registration goroutine, so a dependency on the component may miss it.
	etcd pulumi.Resource
	// The entrypoint once registered, and its arguments: the stack's outputs read them.
	entry     *entrypoint.Entrypoint
	entryArgs *entrypoint.Args
	// opts carry the Kubernetes provider and what every workload waits for (the namespace, the
	// cluster, the NetworkPolicies, the pull Secrets).
	opts []pulumi.ResourceOption
}

// presetWorkloads turns on the switches that default to on (Load, before decoding).
func presetWorkloads(c *Config) {
	for _, wl := range workloads {
		if wl.preset != nil {
			wl.preset(c)
		}
	}
}

// applyWorkloadDefaults fills every section's defaults: first what each takes from the node
// pools, then the rest.
func (c *Config) applyWorkloadDefaults() {
	pools := c.pools()
	for _, wl := range workloads {
		if wl.poolDefaults != nil {
			wl.poolDefaults(c, pools)
		}
	}
	for _, wl := range workloads {
		if wl.defaults != nil {
			wl.defaults(c)
		}
	}
}

// validateWorkloads checks every section, then that all GPU pods of a pool fit its nodes
// together.
func (c *Config) validateWorkloads(v *validator) {
	for _, wl := range workloads {
		if wl.check != nil {
			wl.check(c, v)
		}
	}
	c.validateGPUBudget(v)
}

// enabledWorkloads are the workloads the config runs, in order.
func (c *Config) enabledWorkloads() []*workload {
	var out []*workload
	for _, wl := range workloads {
		if wl.on(c) {
			out = append(out, wl)
		}
	}
	return out
}

// deployWorkloads registers every workload the config enables: those marked first, then the
// others, each in order.
func deployWorkloads(ctx *pulumi.Context, c *Config, w *wiring) error {
	for _, first := range []bool{true, false} {
		for _, wl := range c.enabledWorkloads() {
			if wl.first != first || wl.deploy == nil {
				continue
			}
			if err := wl.deploy(ctx, c, w); err != nil {
				return err
			}
		}
	}
	return nil
}

// workloadAllows are the NetworkPolicy allows of every workload the config enables.
func workloadAllows(c *Config) []isolation.Allow {
	var out []isolation.Allow
	for _, wl := range c.enabledWorkloads() {
		if wl.allows != nil {
			out = append(out, wl.allows(c)...)
		}
	}
	return out
}

// WorkloadOutputs are the enabled workloads' stack outputs: endpoints, the commands that reach
// them, and what a training script needs to know. The entrypoint's are the stack's own
// (StackOutputs). The one secret, Grafana's admin password, is a secret output (encrypted in
// state); the printed command shows it from the stack's state.
func WorkloadOutputs(c *Config, kube KubeAccess) pulumi.Map {
	out := pulumi.Map{}
	for _, wl := range c.enabledWorkloads() {
		if wl.outputs == nil {
			continue
		}
		for k, v := range wl.outputs(c, kube) {
			out[k] = v
		}
	}
	return out
}

// workloadPools are the pools the enabled workloads' pods run on, each with its workloads.
func (c *Config) workloadPools() map[string][]string {
	users := map[string][]string{}
	for _, wl := range c.enabledWorkloads() {
		if wl.pools == nil {
			continue
		}
		for _, u := range wl.pools(c) {
			users[u.pool] = append(users[u.pool], u.who)
		}
	}
	return users
}
