package elastic

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"kolotoc/components/meta"
)

// Key is the elastic workers' config key, kolotoc:elastic: the prefix of every problem Validate
// reports.
const Key = "elastic"

// Config is the elastic workers' config section, kolotoc:elastic, as the stack file says it: the
// YAML shape of the section, with each field's meaning and default. The stack fills the
// pool-dependent defaults and the rendezvous id, and checks the whole against the node pools and
// the etcd component before the workers are registered.
type Config struct {
	Enabled     bool              `json:"enabled"`     // deploy the workers; default false
	MinNodes    int               `json:"minNodes"`    // torchrun --nnodes lower bound (nodes = worker pods); default 1
	MaxNodes    int               `json:"maxNodes"`    // torchrun --nnodes upper bound; default minNodes
	Nodes       int               `json:"nodes"`       // worker pods to run now, minNodes..maxNodes; default maxNodes
	GPUsPerNode int               `json:"gpusPerNode"` // GPUs per worker pod and --nproc_per_node; default the pool's gpusPerNode
	Pool        string            `json:"pool"`        // node pool name; default the first GPU pool
	Image       string            `json:"image"`       // PyTorch image with torchrun (etcd backends: python-etcd, else installed at start); default DefaultImage
	Command     []string          `json:"command"`     // training script and arguments after torchrun's options; default the built-in all-reduce check
	RdzvBackend string            `json:"rdzvBackend"` // c10d | etcd-v2 | etcd; default c10d (etcd backends need kolotoc:etcd.enabled)
	RdzvID      string            `json:"rdzvId"`      // --rdzv_id, the job's identity in the rendezvous; default kolotoc-<stack>
	RdzvPort    int               `json:"rdzvPort"`    // port of worker 0's c10d store; default 29400
	RdzvConf    RdzvConf          `json:"rdzvConf"`    // torchrun --rdzv_conf options (map, or list of key=value), joined to the wrapper's is_host; default none
	MaxRestarts int               `json:"maxRestarts"` // --max_restarts of the worker group; default 3
	CPU         string            `json:"cpu"`         // CPU request per worker as a quantity; default 8, or all cores but one of the pool's node when smaller
	Memory      string            `json:"memory"`      // memory request and limit per worker as a quantity; default 64Gi, or three quarters of the pool's node when smaller
	ShmSize     string            `json:"shmSize"`     // memory-backed /dev/shm per worker (NCCL, DataLoader workers) as a quantity, at most memory; default memory
	OnSuccess   string            `json:"onSuccess"`   // keep | release: release scales the workers to zero once torchrun succeeds; default keep
	Env         []meta.EnvSetting `json:"env"`         // environment of the workers (runs.go)
	// TerminationGracePeriodSeconds is the time a worker gets between SIGTERM (a drain, a Spot
	// reclaim, a deleted pod) and SIGKILL, for the training script to checkpoint (seconds);
	// default 120, or the cloud's Spot notice on a Spot pool when shorter.
	TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
}

// DefaultImage is the workers' image when elastic.image is empty, pinned by a tag that exists
// upstream (validation refuses tagless and :latest images). It has torchrun; it lacks
// python-etcd, which the workers install at start when an etcd backend is used.
const DefaultImage = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultMinNodes: one node (worker pod) lets training start as soon as anything is
	// scheduled.
	DefaultMinNodes = 1
	// DefaultRdzvPort: torchrun's documented c10d port.
	DefaultRdzvPort = 29400
	// DefaultMaxRestarts: worker-group restarts (count) before torchrun gives up; each
	// membership change costs one.
	DefaultMaxRestarts = 3
	// defaultCPU, defaultMemory: per worker (cores, bytes); data loading runs beside the GPUs.
	defaultCPU    = "8"
	defaultMemory = "64Gi"
)

// Backends are the values kolotoc:elastic.rdzvBackend allows, in the order its problem lists them.
var Backends = []string{BackendC10d, BackendEtcdV2, BackendEtcd}

// rdzvIDPattern: the rendezvous id becomes an etcd key and a store prefix; keep it plain.
var rdzvIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// NewConfig is the section before the stack file is read: DefaultMaxRestarts, set before
// decoding since a stack's explicit 0 restarts is valid and must be kept.
func NewConfig() Config { return Config{MaxRestarts: DefaultMaxRestarts} }

// DefaultPools fills what the workers take from the stack's node pools: the first GPU pool,
// that pool's GPUs per worker, and a worker's CPU and memory when the defaults (8 cores, 64Gi)
// would not fit one of its nodes (meta.Pool.FitDefaults: a p3.2xlarge, 8 vCPUs and 61 GiB, gets
// 7 cores and 45Gi).
func (el *Config) DefaultPools(p meta.Pools) {
	meta.Fill(&el.Pool, p.First(true))
	pool := p.Get(el.Pool)
	meta.Fill(&el.GPUsPerNode, pool.GPUsPerNode)
	cpu, memory := pool.FitDefaults(defaultCPU, defaultMemory)
	meta.Fill(&el.CPU, cpu)
	meta.Fill(&el.Memory, memory)
}

// Default fills the zero values the workers decide alone; maxNodes follows minNodes and nodes
// follow maxNodes. DefaultPools fills the pool and gpusPerNode; the rendezvous id comes from the
// stack's name, which the stack fills. It fills zero values only, so applying it twice
// changes nothing.
func (el *Config) Default() {
	meta.Fill(&el.MinNodes, DefaultMinNodes)
	meta.Fill(&el.MaxNodes, el.MinNodes)
	meta.Fill(&el.Nodes, el.MaxNodes)
	meta.Fill(&el.Image, DefaultImage)
	meta.Fill(&el.RdzvBackend, BackendC10d)
	meta.Fill(&el.RdzvPort, DefaultRdzvPort)
	meta.Fill(&el.CPU, defaultCPU)
	meta.Fill(&el.Memory, defaultMemory)
	meta.Fill(&el.ShmSize, el.Memory) // meta.ShmVolume says why
}

// Validate reports what is wrong with the workers' own settings, with their full keys. What
// depends on the node pools (the pool, gpusPerNode, whether a worker fits a node), on the other
// workloads (an etcd backend needs the etcd component) and on the stack (the image's pin, the
// command's arguments, hostnames in the namespace, runs and env) the stack checks.
func (el Config) Validate(p meta.Problems) {
	meta.CheckShm(p, Key+".shmSize", el.ShmSize, Key+".memory", el.Memory)
	if el.MinNodes < 1 {
		p.Add(Key+".minNodes", strconv.Itoa(el.MinNodes), "must be at least 1")
	}
	if el.MinNodes > el.MaxNodes {
		p.Add(Key+".minNodes", strconv.Itoa(el.MinNodes),
			fmt.Sprintf("more than %s.maxNodes (%d); allowed: 1..%d", Key, el.MaxNodes, el.MaxNodes))
	} else if el.Nodes < el.MinNodes || el.Nodes > el.MaxNodes {
		p.Add(Key+".nodes", strconv.Itoa(el.Nodes),
			fmt.Sprintf("worker pods to run must lie between minNodes and maxNodes; allowed: %d..%d", el.MinNodes, el.MaxNodes))
	}
	if !slices.Contains(Backends, el.RdzvBackend) {
		p.Add(Key+".rdzvBackend", meta.OrUnset(el.RdzvBackend), "allowed: "+strings.Join(Backends, ", "))
	}
	if !rdzvIDPattern.MatchString(el.RdzvID) {
		p.Add(Key+".rdzvId", meta.OrUnset(el.RdzvID), "letters, digits, '.', '_' and '-', at most 63 characters, starting with a letter or digit")
	}
	if el.RdzvPort < 1 || el.RdzvPort > 65535 {
		p.Add(Key+".rdzvPort", strconv.Itoa(el.RdzvPort), "allowed: 1..65535")
	}
	el.validateRdzvConf(p)
	if el.MaxRestarts < 0 {
		p.Add(Key+".maxRestarts", strconv.Itoa(el.MaxRestarts), "must be 0 or more")
	}
}
