// Package queue is the stack's queue (kolotoc:queue): Kueue's LocalQueue for the stack, the
// ClusterQueue and ResourceFlavor behind it (unless the stack names an existing ClusterQueue),
// a WorkloadPriorityClass per configured workload, and, on the clouds, Kueue itself. The
// workloads that need all their pods at once join it as one unit (meta.SetGang for the towers
// and the elastic minimum, a plain pod group, meta.Gang, for a TF cluster).
package queue

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"kolotoc/components/meta"
)

// Key is the section's config key, kolotoc:queue: the prefix of every problem Validate reports.
const Key = "queue"

// Types of queue.type.
const (
	TypeOff   = "off"   // pods are scheduled as they come (Kolotoc's behaviour before the section)
	TypeKueue = "kueue" // gang admission through Kueue
)

// Allowed is what queue.type allows.
var Allowed = []string{TypeOff, TypeKueue}

// Provisionings of queue.provisioning: how the nodes of an admitted workload arrive.
const (
	// ProvisioningStandard: as the cluster's autoscaler adds them, node by node, for the pods
	// that are Pending (a ring may run short of nodes while it waits for the last ones).
	ProvisioningStandard = "standard"
	// ProvisioningQueued: all of them at once or none. Kueue reserves the quota, then asks the
	// cloud's queued provisioning for every GPU node the workload needs (a ProvisioningRequest,
	// through its ProvisioningRequest admission check) and admits the workload once they are all
	// there. On gcp that is GKE's Dynamic Workload Scheduler (flex-start with queued provisioning).
	ProvisioningQueued = "queued"
)

// AllowedProvisionings is what queue.provisioning allows.
var AllowedProvisionings = []string{ProvisioningStandard, ProvisioningQueued}

// DefaultMaxRunDuration: how long queued-provisioned nodes may run (queue.maxRunDuration). GKE
// takes a queued node pool's nodes back when the duration is over, run or no run, and allows at
// most seven days ("up to seven days": https://cloud.google.com/kubernetes-engine/docs/concepts/dws);
// its own default is that maximum, and so is Kolotoc's, so that no run is cut short by a default.
// A shorter duration is the user's choice, for a run known to end sooner.
const DefaultMaxRunDuration = "168h"

// MaxRunDurationLimit is the longest queue.maxRunDuration: GKE's seven days.
const MaxRunDurationLimit = 7 * 24 * time.Hour

// Workloads whose pods a queue admits as one unit, the keys of queue.priorities.
var Workloads = []string{"towers", "tfcluster", "elastic"}

// ElasticExtra names the priority class of the elastic workers above minNodes, which the stack
// makes one below the elastic group's (not a key of queue.priorities).
const ElasticExtra = "elastic-extra"

// Kueue's release Kolotoc installs on the clouds and expects elsewhere: its chart (the upstream
// one, from its OCI registry) and controller image, pinned, the same version the local test bed
// builds (testbed/tools/tools.sh KUEUE_VERSION; a test checks they agree).
const (
	KueueVersion      = "v0.17.0"
	KueueChart        = "oci://registry.k8s.io/kueue/charts/kueue"
	KueueImageRepo    = "registry.k8s.io/kueue/kueue"
	DefaultKueueImage = KueueImageRepo + ":" + KueueVersion
	// KueueNamespace is where the chart installs Kueue (and upstream's manifests do).
	KueueNamespace = "kueue-system"
	// APIVersion is the Kueue API Kolotoc writes (served since Kueue v0.15; v0.17 stores it).
	APIVersion = "kueue.x-k8s.io/v1beta2"
	// DefaultLocalQueue is the stack's LocalQueue's name. Not Kueue's "default": a LocalQueue of
	// that name would put every job of the namespace in the queue (Kueue's LocalQueueDefaulting).
	DefaultLocalQueue = "kolotoc"
)

// Config is the queue's config section, kolotoc:queue, as the stack file says it.
type Config struct {
	Type string `json:"type"` // off | kueue; default off
	// LocalQueue: the name of the stack's LocalQueue, in its namespace; default kolotoc.
	LocalQueue string `json:"localQueue"`
	// ClusterQueue: an existing ClusterQueue the LocalQueue feeds (shared with other stacks or
	// teams); default none: the stack makes one named after its namespace, with a ResourceFlavor
	// of the same name and the quota below.
	ClusterQueue string `json:"clusterQueue"`
	// Quota: what the stack's ClusterQueue admits at once, or, with clusterQueue, what that queue
	// grants this stack (for validation only); default the sum over the node pools of
	// maxNodes (or nodes) × each node's GPUs, CPUs and memory.
	Quota Quota `json:"quota"`
	// Priorities: workload (towers, tfcluster, elastic) → the priority of its Workloads among the ClusterQueue's;
	// the stack makes a WorkloadPriorityClass <namespace>-<workload> for each; default none
	// (Kueue's priority 0).
	Priorities map[string]int32 `json:"priorities"`
	// Install: Kolotoc installs Kueue (the upstream chart, pinned, rendered and scoped by Kolotoc, in
	// kueue-system); default true on gcp, aws and azure; false on existing (the cluster's own
	// Kueue is used, and its API checked at preview) and simulated (the local test bed runs it).
	Install *bool `json:"install"`
	// Image: Kueue's controller image when installed, pinned by tag; default DefaultKueueImage.
	Image string `json:"image"`
	// Provisioning: how the GPU nodes of an admitted workload arrive: standard (the cluster
	// autoscaler adds them node by node) or queued (all at once or none, through the cloud's
	// queued provisioning, gcp only: GKE's Dynamic Workload Scheduler; every GPU pool must sit
	// at zero); default standard. docs/using/autoscaling.md.
	Provisioning string `json:"provisioning"`
	// MaxRunDuration: with provisioning queued, how long the provisioned nodes may run before the
	// cloud takes them back, running or not (a duration, at most 168h); default 168h.
	MaxRunDuration string `json:"maxRunDuration"`
}

// Quota is a ClusterQueue's nominal quota (kolotoc:queue.quota); zero values are derived.
type Quota struct {
	GPUs   int    `json:"gpus"`   // nvidia.com/gpu
	CPU    string `json:"cpu"`    // cores as a quantity
	Memory string `json:"memory"` // bytes as a quantity
}

// On reports whether the stack queues its workloads.
func (c Config) On() bool { return c.Type == TypeKueue }

// Default fills zero values; the quota is the stack's (it knows the pools), install the cloud's.
func (c *Config) Default(cloudInstalls bool) {
	meta.Fill(&c.Type, TypeOff)
	if !c.On() {
		return
	}
	meta.Fill(&c.LocalQueue, DefaultLocalQueue)
	meta.FillPtr(&c.Install, cloudInstalls)
	if *c.Install {
		meta.Fill(&c.Image, DefaultKueueImage)
	}
	meta.Fill(&c.Provisioning, ProvisioningStandard)
	if c.Provisioning == ProvisioningQueued {
		meta.Fill(&c.MaxRunDuration, DefaultMaxRunDuration)
	}
}

// Queued reports whether the queue's GPU nodes come through the cloud's queued provisioning.
func (c Config) Queued() bool { return c.On() && c.Provisioning == ProvisioningQueued }

// Validate reports what is wrong with the section's own settings, each with its full key. The
// stack checks the install against the cloud and each gang against the quota.
func (c Config) Validate(p meta.Problems) {
	if !contains(Allowed, c.Type) {
		p.Add(Key+".type", c.Type, "allowed: "+strings.Join(Allowed, ", "))
		return
	}
	// Each value is checked by itself first, whatever the type, so that its error says what it allows.
	provisioningOK := c.Provisioning == "" || contains(AllowedProvisionings, c.Provisioning)
	if !provisioningOK {
		p.Add(Key+".provisioning", c.Provisioning, "allowed: "+strings.Join(AllowedProvisionings, ", "))
	}
	durationOK := c.MaxRunDuration == ""
	if !durationOK {
		_, err := MaxRunDurationSeconds(c.MaxRunDuration)
		if durationOK = err == nil; !durationOK {
			p.Add(Key+".maxRunDuration", c.MaxRunDuration, err.Error())
		}
	}
	if !c.On() {
		for _, k := range []struct {
			key, v string
			ok     bool
		}{{".provisioning", c.Provisioning, provisioningOK}, {".maxRunDuration", c.MaxRunDuration, durationOK}} {
			if k.v != "" && k.ok {
				p.Add(Key+k.key, k.v, "Kueue asks for a workload's nodes when it admits it, so this needs the queue; allowed: unset, or queue.type kueue")
			}
		}
		if c.LocalQueue != "" || c.ClusterQueue != "" || len(c.Priorities) > 0 || c.Install != nil || c.Image != "" ||
			c.Quota != (Quota{}) {
			p.Add(Key+".type", c.Type, "the other queue keys take effect with type kueue only; allowed: kueue, or remove them")
		}
		return
	}
	for _, n := range []struct{ key, name string }{{".localQueue", c.LocalQueue}, {".clusterQueue", c.ClusterQueue}} {
		if n.name == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(n.name); len(errs) > 0 {
			p.Add(Key+n.key, n.name, "not a Kubernetes object name: "+strings.Join(errs, "; "))
		}
	}
	c.validateProvisioning(p)
	if c.LocalQueue == "default" {
		p.Add(Key+".localQueue", c.LocalQueue, "Kueue puts every job of a namespace with a LocalQueue called default in it; choose another name")
	}
	if c.Quota.GPUs < 0 {
		p.Add(Key+".quota.gpus", fmt.Sprint(c.Quota.GPUs), "allowed: 0 or more GPUs")
	}
	for _, q := range []struct{ key, v string }{{".quota.cpu", c.Quota.CPU}, {".quota.memory", c.Quota.Memory}} {
		if q.v == "" {
			continue
		}
		if v, err := resource.ParseQuantity(q.v); err != nil || v.Sign() <= 0 {
			p.Add(Key+q.key, q.v, "not a positive quantity (e.g. 64, 500m, 256Gi)")
		}
	}
	for _, w := range meta.SortedKeys(c.Priorities) {
		if !contains(Workloads, w) {
			p.Add(Key+".priorities."+w, fmt.Sprint(c.Priorities[w]), "not a queued workload; allowed: "+strings.Join(Workloads, ", "))
		}
		// Kueue's own limit: above 1e9 is reserved, as for PriorityClass.
		if v := c.Priorities[w]; v > 1_000_000_000 || v < -1_000_000_000 {
			p.Add(Key+".priorities."+w, fmt.Sprint(v), "allowed: -1000000000 to 1000000000")
		}
	}
}

// validateProvisioning checks provisioning and maxRunDuration; the stack checks the cloud and pools.
func (c Config) validateProvisioning(p meta.Problems) {
	if c.Provisioning != ProvisioningQueued {
		if c.MaxRunDuration != "" {
			p.Add(Key+".maxRunDuration", c.MaxRunDuration, "only queued nodes have a run duration; allowed: unset, or provisioning queued")
		}
		return
	}
	if c.ClusterQueue != "" {
		p.Add(Key+".provisioning", c.Provisioning, fmt.Sprintf("the provisioning admission check goes on the stack's own ClusterQueue, not on %s (clusterQueue); "+
			"allowed: standard, or remove clusterQueue", c.ClusterQueue))
	}
}

// MaxRunDurationSeconds is a validated maxRunDuration in seconds, as the ProvisioningRequest's
// maxRunDurationSeconds parameter takes it.
func MaxRunDurationSeconds(d string) (int, error) {
	v, err := time.ParseDuration(d)
	if err != nil || v <= 0 || v > MaxRunDurationLimit || v%time.Second != 0 {
		return 0, fmt.Errorf("allowed: a duration in whole seconds, more than 0 and at most %s (GKE's seven days), e.g. 24h, 72h", DefaultMaxRunDuration)
	}
	return int(v / time.Second), nil
}

// PriorityClass is the WorkloadPriorityClass of a workload of the stack in namespace.
func PriorityClass(namespace, workload string) string { return namespace + "-" + workload }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
