package tfcluster

import (
	"strconv"
	"strings"

	"kolotoc/components/meta"
)

// Key is the TensorFlow cluster's config key, kolotoc:tfcluster: the prefix of every problem
// Validate reports.
const Key = "tfcluster"

// Config is the TensorFlow cluster's config section, kolotoc:tfcluster, as the stack file says
// it: the YAML shape of the section, with each field's meaning and default. The stack fills the
// pool-dependent defaults and the TensorBoard's image, decides whether the cluster runs its own
// TensorBoard (the entrypoint's), and checks the whole against the node pools before the cluster
// is registered.
type Config struct {
	Enabled          bool              `json:"enabled"`          // deploy the cluster; default false
	Image            string            `json:"image"`            // image of every task; default DefaultImage
	Command          []string          `json:"command"`          // program every task runs once TF_CONFIG is set; default the built-in check (needs a chief and a ps)
	Port             int               `json:"port"`             // gRPC port of every task; default 2222
	PS               Role              `json:"ps"`               // parameter servers; count default 1, CPU pool
	Workers          Role              `json:"workers"`          // workers; count default 2, at least 1, GPU pool
	Chief            Role              `json:"chief"`            // the chief (coordinator); count 0 or 1, default 1, CPU pool
	Evaluator        Role              `json:"evaluator"`        // the evaluator; count 0 or 1, default 1, CPU pool
	TensorBoard      *bool             `json:"tensorboard"`      // run the cluster's own TensorBoard when the entrypoint runs none; default true
	TensorBoardImage string            `json:"tensorboardImage"` // image of the cluster's own TensorBoard (when entrypoint.tensorboard is off); default the entrypoint's TensorBoard image
	OnSuccess        string            `json:"onSuccess"`        // keep | release: release scales every task to zero once the chief succeeds; default keep
	Env              []meta.EnvSetting `json:"env"`              // environment of every task (runs.go)
	// Where the data lives, each a directory relative to storage.mountPath (the TF charts' train,
	// eval and log directories on their share), handed to every task in an environment variable.
	CheckpointDir string `json:"checkpointDir"` // checkpoints, $KOLOTOC_CHECKPOINT_DIR; default DefaultCheckpointDir
	LogDir        string `json:"logDir"`        // logs, $KOLOTOC_LOG_DIR; default DefaultLogDir
	EvalDir       string `json:"evalDir"`       // evaluation output, $KOLOTOC_EVAL_DIR; default none (the variable is not set)
	// TerminationGracePeriodSeconds is the time every task gets between SIGTERM (a drain, a Spot
	// reclaim, a deleted pod) and SIGKILL, for the chief to checkpoint (seconds); default 120, or
	// the shortest Spot notice of the tasks' pools when shorter.
	TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
}

// Role is one TensorFlow task type (kolotoc:tfcluster.<role>).
type Role struct {
	Count  int    `json:"count"`  // tasks of this type; the default is the role's (ps, workers, chief, evaluator)
	Pool   string `json:"pool"`   // node pool name; default the first GPU pool for workers, the first CPU pool otherwise
	GPUs   int    `json:"gpus"`   // GPUs per task; default the pool's gpusPerNode for workers, 0 otherwise
	CPU    string `json:"cpu"`    // CPU request per task as a quantity; default 4 (workers), 2 (others)
	Memory string `json:"memory"` // memory request and limit per task as a quantity; default 16Gi (workers), 8Gi (others)
	// ShmSize is the memory-backed /dev/shm per task (NCCL, input pipelines) as a quantity, at
	// most memory; default memory.
	ShmSize string `json:"shmSize"`
	// Image is this role's image (the TF charts' light parameter-server image beside the GPU
	// workers' image), pinned; default tfcluster.image.
	Image string `json:"image"`
}

// Default directories under storage.mountPath: beside the other workloads' checkpoints, and
// under logs/, which the entrypoint's TensorBoard reads.
const (
	DefaultCheckpointDir = "checkpoints/tfcluster"
	DefaultLogDir        = "logs/tfcluster"
)

// DefaultImage is every task's image when tfcluster.image is empty, pinned by a tag that exists
// upstream (validation refuses tagless and :latest images); the -gpu variant, for the workers.
const DefaultImage = "tensorflow/tensorflow:2.17.0-gpu"

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultPort: the gRPC port TensorFlow's own examples use.
	DefaultPort = 2222
	// Task counts: one ps, two workers (the smallest cluster that exercises asynchronous
	// updates), one chief (the built-in program's coordinator), one evaluator.
	DefaultPS        = 1
	DefaultWorkers   = 2
	DefaultChief     = 1
	DefaultEvaluator = 1
	// defaultWorkerCPU, defaultWorkerMemory, defaultTaskCPU, defaultTaskMemory: requests
	// (cores, bytes) of a worker and of any other task.
	defaultWorkerCPU    = "4"
	defaultWorkerMemory = "16Gi"
	defaultTaskCPU      = "2"
	defaultTaskMemory   = "8Gi"
)

// NewConfig is the section before the stack file is read: the task counts, set before decoding
// since a stack's 0 chiefs, evaluators or parameter servers leaves them out, and its 0 workers
// must be reported rather than silently defaulted.
func NewConfig() Config {
	return Config{
		PS: Role{Count: DefaultPS}, Workers: Role{Count: DefaultWorkers},
		Chief: Role{Count: DefaultChief}, Evaluator: Role{Count: DefaultEvaluator},
	}
}

// NamedRole is one task type of the section: its key (tfcluster.workers), its type as TF_CONFIG
// names it, and its settings.
type NamedRole struct {
	Key, Type string
	Role      *Role
}

// Roles lists the section's task types in the order they are checked and registered: chief,
// workers, parameter servers, evaluator.
func (tf *Config) Roles() []NamedRole {
	return []NamedRole{
		{Key + ".chief", TypeChief, &tf.Chief},
		{Key + ".workers", TypeWorker, &tf.Workers},
		{Key + ".ps", TypePS, &tf.PS},
		{Key + ".evaluator", TypeEvaluator, &tf.Evaluator},
	}
}

// Tasks are the section's task types in Roles' order, each named TaskName(type); cpuLimit gives
// a type's CPU limit from its role (nil: the request).
func (tf *Config) Tasks(cpuLimit func(Role) string) []Task {
	var out []Task
	for _, r := range tf.Roles() {
		t := Task{Role: *r.Role, Type: r.Type, Name: TaskName(r.Type)}
		if cpuLimit != nil {
			t.CPULimit = cpuLimit(*r.Role)
		}
		out = append(out, t)
	}
	return out
}

// DefaultPools fills what the tasks take from the stack's node pools: the workers run on the
// first GPU pool with its GPUs per node, every other role on the first CPU pool.
func (tf *Config) DefaultPools(p meta.Pools) {
	meta.Fill(&tf.Workers.Pool, p.First(true))
	meta.Fill(&tf.Workers.GPUs, p.Get(tf.Workers.Pool).GPUsPerNode)
	for _, r := range []*Role{&tf.PS, &tf.Chief, &tf.Evaluator} {
		meta.Fill(&r.Pool, p.First(false))
	}
}

// Default fills the zero values the cluster decides alone (DefaultPools fills the pools and the
// workers' GPUs); the TensorBoard's image is the entrypoint's, which the stack fills. It fills zero values only, so applying it twice changes nothing.
func (tf *Config) Default() {
	meta.Fill(&tf.Image, DefaultImage)
	meta.FillPtr(&tf.TensorBoard, true)
	meta.Fill(&tf.Port, DefaultPort)
	meta.Fill(&tf.CheckpointDir, DefaultCheckpointDir)
	meta.Fill(&tf.LogDir, DefaultLogDir)
	for _, r := range tf.Roles() {
		cpu, memory := defaultTaskCPU, defaultTaskMemory
		if r.Type == TypeWorker {
			cpu, memory = defaultWorkerCPU, defaultWorkerMemory
		}
		meta.Fill(&r.Role.CPU, cpu)
		meta.Fill(&r.Role.Memory, memory)
		meta.Fill(&r.Role.ShmSize, r.Role.Memory) // meta.ShmVolume says why
		meta.Fill(&r.Role.Image, tf.Image)
	}
}

// Validate reports what is wrong with the cluster's own settings, with their full keys: the task
// counts, what the built-in program needs of them, the port and the GPUs of each task type that
// runs. What depends on the node pools (a task type's pool and GPUs, whether a task fits a node),
// on the entrypoint (whether the cluster's TensorBoard and its image matter) and on the stack
// (the images' pins, the command's arguments, hostnames in the namespace, runs and env) the
// stack checks.
func (tf Config) Validate(p meta.Problems) {
	for _, d := range []struct{ key, dir string }{{"checkpointDir", tf.CheckpointDir}, {"logDir", tf.LogDir}, {"evalDir", tf.EvalDir}} {
		if d.key == "evalDir" && d.dir == "" {
			continue
		}
		clean := strings.Trim(d.dir, "/")
		if strings.HasPrefix(d.dir, "/") || clean == "" || strings.Contains("/"+clean+"/", "/../") || strings.Contains("/"+clean+"/", "/./") ||
			strings.ContainsAny(d.dir, " \t\n\"'$`\\") {
			p.Add(Key+"."+d.key, meta.OrUnset(d.dir), "a relative directory under storage.mountPath, without '.', '..', spaces, quotes or '$' (e.g. checkpoints/resnet)")
		}
	}
	if tf.Workers.Count < 1 {
		p.Add(Key+".workers.count", strconv.Itoa(tf.Workers.Count), "a TensorFlow cluster needs at least one worker; allowed: 1 or more")
	}
	if tf.PS.Count < 0 {
		p.Add(Key+".ps.count", strconv.Itoa(tf.PS.Count), "must be 0 or more")
	}
	for _, r := range []NamedRole{{Key: Key + ".chief", Role: &tf.Chief}, {Key: Key + ".evaluator", Role: &tf.Evaluator}} {
		if r.Role.Count < 0 || r.Role.Count > 1 {
			p.Add(r.Key+".count", strconv.Itoa(r.Role.Count), "allowed: 0, 1")
		}
	}
	if len(tf.Command) == 0 {
		// The built-in program is parameter-server training coordinated by the chief.
		if tf.Chief.Count != 1 {
			p.Add(Key+".chief.count", strconv.Itoa(tf.Chief.Count), "the built-in program coordinates from the chief; allowed: 1, or set "+Key+".command to your own program")
		}
		if tf.PS.Count < 1 {
			p.Add(Key+".ps.count", strconv.Itoa(tf.PS.Count), "the built-in program keeps its variables on parameter servers; allowed: 1 or more, or set "+Key+".command to your own program")
		}
	}
	for _, r := range tf.Roles() {
		if r.Role.Count > 0 {
			meta.CheckShm(p, r.Key+".shmSize", r.Role.ShmSize, r.Key+".memory", r.Role.Memory)
		}
	}
	if tf.Port < 1 || tf.Port > 65535 {
		p.Add(Key+".port", strconv.Itoa(tf.Port), "allowed: 1..65535")
	}
	for _, r := range tf.Roles() {
		if r.Role.Count > 0 && r.Role.GPUs < 0 {
			p.Add(r.Key+".gpus", strconv.Itoa(r.Role.GPUs), "must be 0 (a CPU task) or more")
		}
	}
}
