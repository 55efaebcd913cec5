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

// The workloads, registered once. Each declares its whole entry in its own package,
// stacks/workloads/<key> (beside its component in components/), and registers it from its init:
// how its section starts, the defaults it takes from the node pools and from the workloads before
// it, its checks in the stack's context, the facts other checks need of it (its pools, its GPU
// pods, its env, its gang), and how it is deployed, allowed and reported. Importing
// kolotoc/stacks/workloads registers them all, as Kueue's integrations are registered by importing
// pkg/controller/jobs. The stack's phases iterate the entries (load.go, defaults.go, validate.go,
// deploy.go and the features: runs, runas, security, queue, clouds); none names the workloads.
// Adding a workload is its component, its entry package, its section's field in Config
// (config.go) and one import in stacks/workloads.

// workloads in the order every phase takes them, which is the order of their sections' fields
// in Config: pool defaults (a workload may take from the ones before it: the entrypoint its pool
// from the carriers'; the other defaults follow every pool default, so the towers' launcher, the
// data-in Job and the monitoring take the entrypoint's pool whatever the order), checks (problems
// are listed in this order) and deploy (the ones marked first, then the others: etcd before the
// elastic workers that wait for it). Filled by Register, from the entry packages' init, before
// any phase runs; read through entries.
var workloads []*Workload

// entries are the registered workloads. None means the program did not import
// kolotoc/stacks/workloads: it would deploy a stack without its workloads, and delete those
// deployed. That is the program's mistake, found by every test that loads a stack, so it panics.
func entries() []*Workload {
	if len(workloads) == 0 {
		panic(`stacks: no workload is registered; import _ "kolotoc/stacks/workloads" (main.go does)`)
	}
	return workloads
}

// Register adds a workload's entry to workloads, at the place of its section's field in Config.
// Its key must be a Config key, and registered once: a mistake here is the program's, found by
// every test, so it panics.
func Register(wl *Workload) {
	k, ok := configKeys[wl.Key]
	if !ok {
		panic(fmt.Sprintf("workload %q: Config has no field tagged key:%q", wl.Key, wl.Key))
	}
	i, found := slices.BinarySearchFunc(workloads, k.index, func(w *Workload, index int) int {
		return cmp.Compare(configKeys[w.Key].index, index)
	})
	if found {
		panic(fmt.Sprintf("workload %q registered twice", wl.Key))
	}
	workloads = slices.Insert(workloads, i, wl)
}

// Workload is one Workload's entry. Every function but enabled may be nil: nothing of that kind.
type Workload struct {
	Key     string               // kolotoc:<key>
	Enabled func(c *Config) bool // nil: always on (the entrypoint)

	// Preset turns on, before decoding, the switches that default to on; decoding then only
	// turns off what the stack turns off.
	Preset func(c *Config)
	// PoolDefaults fills what the section takes from the node pools (and from the sections
	// before it, whose pool defaults are in); defaults fills the rest, after every section's
	// pool defaults, the section's own last. Both fill zero values only.
	PoolDefaults func(c *Config, pools meta.Pools)
	Defaults     func(c *Config)
	OnSuccess    func(c *Config) *string // its run policy (runs.go): defaulted and checked

	// Check checks the section in the stack's context, whether enabled or not (a section that
	// is off has nothing to Check, or a switch that needs another).
	Check func(c *Config, v *Validator)
	// The facts other checks need of an enabled workload: the Pools its pods run on (a noun for
	// messages: "towers"), its GPU pods (validateGPUBudget), its env settings (runs.go), the
	// Secrets it writes (OwnSecrets), the gang its queue admits (queue.go).
	Pools   func(c *Config) []PoolUse
	GPUs    func(c *Config) []GPUDemand
	Env     func(c *Config) []EnvSetting // checked whether enabled or not
	Secrets []string
	Gang    func(c *Config) *GangNeed

	// The shared store and the pods (runas.go, security.go): the Image the store's owner Job
	// may run (a training Image, with a shell), the directories it writes under the shared
	// claim, and whether its pods mount the per-pod scratch.
	Image   func(c *Config) string
	Dirs    func(c *Config) []string
	Scratch bool

	// First: registered before the other workloads, which wait for it (the entrypoint, the
	// data-in Job). deploy registers it; allows are its NetworkPolicy allows; outputs its stack
	// outputs.
	First  bool
	Deploy func(ctx *pulumi.Context, c *Config, w *Wiring) error
	Allows func(c *Config) []isolation.Allow
	// AgentsAllows are its allows in the GPU agents' namespace (GPUAgentsNetworkAllows).
	AgentsAllows func(c *Config) []isolation.Allow
	Outputs      func(c *Config, kube KubeAccess) pulumi.Map
}

// on reports whether the config runs the workload.
func (wl *Workload) on(c *Config) bool { return wl.Enabled == nil || wl.Enabled(c) }

// PoolUse is a pool a workload's pods run on, and what they are called in messages.
type PoolUse struct{ Pool, Who string }

// GPUDemand is one workload's GPU pods on a pool.
type GPUDemand struct {
	Who  string `json:"who"`  // config key of the workload
	Pods int    `json:"pods"` // pods
	GPUs int    `json:"gpus"` // GPUs per pod
	Pool string `json:"pool"`
	// Spread: its pods prefer distinct nodes (meta.Labels.SpreadAcrossNodes), which Karpenter
	// honours while the pool's maxNodes allows (growth.go).
	Spread bool `json:"spread"`
}

// EnvSetting is one env key of a workload (kolotoc:<workload>.env).
type EnvSetting struct {
	Key string
	Env []meta.EnvSetting
}

// GangNeed is what a queued workload asks its queue for at once (queue.go).
type GangNeed struct {
	Key, Value, What string
	Need             map[string]string
}

// Wiring is what the stack hands each workload's deploy.
type Wiring struct {
	Site  meta.Site         // what every workload takes from the stack, its namespace input set
	Pools []pulumi.Resource // the simulated node pools: what pods that mount nothing wait for
	// Mount: the pools, the shared claim and its owner Job: what pods that Mount the claim wait
	// for; the data-in Job adds itself, so that the workloads after it wait for it too.
	Mount []pulumi.Resource
	Queue []pulumi.Resource // the stack's queue (queue.go): what queued pods also wait for; none without one
	// NamespaceUID names this life of the namespace (etcd's static volumes); Agents is the GPU
	// Agents' namespace (the DCGM exporter's), nil when there is none.
	NamespaceUID, Agents pulumi.StringInput
	// Etcd is the Etcd StatefulSet once registered (the elastic workers wait for it): the
	// StatefulSet, not the component, since the SDK adds a child to its component from the
	// child's registration goroutine, so a dependency on the component may miss it.
	Etcd pulumi.Resource
	// The entrypoint once registered, and its arguments: the stack's outputs read them.
	Entry     *entrypoint.Entrypoint
	EntryArgs *entrypoint.Args
	// Opts carry the Kubernetes provider and what every workload waits for (the namespace, the
	// cluster, the NetworkPolicies, the pull Secrets).
	Opts []pulumi.ResourceOption
}

// presetWorkloads turns on the switches that default to on (Load, before decoding).
func presetWorkloads(c *Config) {
	for _, wl := range entries() {
		if wl.Preset != nil {
			wl.Preset(c)
		}
	}
}

// applyWorkloadDefaults fills every section's defaults: first what each takes from the node
// pools, then the rest.
func (c *Config) applyWorkloadDefaults() {
	pools := c.pools()
	for _, wl := range entries() {
		if wl.PoolDefaults != nil {
			wl.PoolDefaults(c, pools)
		}
	}
	for _, wl := range entries() {
		if wl.Defaults != nil {
			wl.Defaults(c)
		}
	}
}

// validateWorkloads checks every section, then that all GPU pods of a pool fit its nodes
// together.
func (c *Config) validateWorkloads(v *Validator) {
	for _, wl := range entries() {
		if wl.Check != nil {
			wl.Check(c, v)
		}
	}
	c.validateGPUBudget(v)
}

// enabledWorkloads are the workloads the config runs, in order.
func (c *Config) enabledWorkloads() []*Workload {
	var out []*Workload
	for _, wl := range entries() {
		if wl.on(c) {
			out = append(out, wl)
		}
	}
	return out
}

// deployWorkloads registers every workload the config enables: those marked first, then the
// others, each in order.
func deployWorkloads(ctx *pulumi.Context, c *Config, w *Wiring) error {
	for _, first := range []bool{true, false} {
		for _, wl := range c.enabledWorkloads() {
			if wl.First != first || wl.Deploy == nil {
				continue
			}
			if err := wl.Deploy(ctx, c, w); err != nil {
				return err
			}
		}
	}
	return nil
}

// workloadAllows are the NetworkPolicy allows that hook picks of every workload the config
// enables: those in the stack's namespace (Allows) or in the GPU agents' (AgentsAllows).
func workloadAllows(c *Config, hook func(*Workload) func(*Config) []isolation.Allow) []isolation.Allow {
	var out []isolation.Allow
	for _, wl := range c.enabledWorkloads() {
		if allows := hook(wl); allows != nil {
			out = append(out, allows(c)...)
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
		if wl.Outputs == nil {
			continue
		}
		for k, v := range wl.Outputs(c, kube) {
			out[k] = v
		}
	}
	return out
}

// WorkloadPools are the pools the enabled workloads' pods run on, each with its workloads.
func (c *Config) WorkloadPools() map[string][]string {
	users := map[string][]string{}
	for _, wl := range c.enabledWorkloads() {
		if wl.Pools == nil {
			continue
		}
		for _, u := range wl.Pools(c) {
			users[u.Pool] = append(users[u.Pool], u.Who)
		}
	}
	return users
}
