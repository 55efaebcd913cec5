package ring

import (
	"fmt"
	"strconv"
	"strings"

	"kolotoc/components/meta"
)

// Key is the towers' config key, kolotoc:towers: the prefix of every problem Validate reports.
const Key = "towers"

// Config is the towers' config section, kolotoc:towers, as the stack file says it: the YAML
// shape of the section, with each field's meaning and default. The stack fills the defaults and
// checks the whole against the node pools before the ring is registered.
type Config struct {
	Enabled      bool     `json:"enabled"`      // deploy towers at all; default true
	Count        int      `json:"count"`        // number of towers (MPI hosts), at least 1; default 2
	GPUsPerTower int      `json:"gpusPerTower"` // nvidia.com/gpu per tower, 0 for CPU towers; default the pool's gpusPerNode (0 on a CPU pool)
	Slots        int      `json:"slots"`        // MPI slots per host in the hostfile; default gpusPerTower, 1 for CPU towers
	Pool         string   `json:"pool"`         // node pool name; default the first GPU pool
	Image        string   `json:"image"`        // worker and launcher image; default DefaultImage
	Command      []string `json:"command"`      // launcher command after the hostfile is written; default DefaultLauncherCommand
	HostNetwork  bool     `json:"hostNetwork"`  // run towers on the node's network (needs Pod Security privileged); default false
	SSHPort      int      `json:"sshPort"`      // sshd port on every tower; default 2222
	CPU          string   `json:"cpu"`          // CPU request per tower as a quantity; default 4
	Memory       string   `json:"memory"`       // memory request per tower as a quantity; default 16Gi
	ShmSize      string   `json:"shmSize"`      // memory-backed /dev/shm per tower (NCCL, DataLoader workers) as a quantity, at most memory; default memory
	// Resources are further requests and limits per tower (extended resources such as rdma/hca,
	// hugepages-<size>, ephemeral-storage), merged with cpu, memory and gpusPerTower; default none.
	Resources meta.Resources `json:"resources"`
	// CrossZone: accept a ring whose towers' pool spreads over zones (nodePools[i].placement:
	// spread): every allreduce then crosses zones; default false, such a ring is refused.
	CrossZone bool `json:"crossZone"`

	LauncherPool   string `json:"launcherPool"`   // node pool of the launcher Job: a CPU pool without spot; default entrypoint.pool
	LauncherCPU    string `json:"launcherCpu"`    // CPU request of the launcher as a quantity; default 500m
	LauncherMemory string `json:"launcherMemory"` // memory request of the launcher as a quantity; default 1Gi
	// LauncherImage is the launcher's image (the Horovod chart's master image), pinned: it needs
	// bash, ssh and the MPI of the towers' image; default image.
	LauncherImage string `json:"launcherImage"`
	// LauncherEnv is environment of the launcher only (the Horovod chart's master.env), after env;
	// default none.
	LauncherEnv []meta.EnvSetting `json:"launcherEnv"`

	Run       string            `json:"run"`       // run id: a new id starts a new launcher (the old one replaced); default none
	OnSuccess string            `json:"onSuccess"` // keep | release: release scales the towers to zero when the launcher succeeds; default keep
	Env       []meta.EnvSetting `json:"env"`       // environment of the towers and the launcher (runs.go)

	// MaxRestarts is how many times a failed run (a rank's process, a tower or its node lost) is
	// started again over the whole ring from its last checkpoint, once every tower takes ssh
	// again, before the run ends failed (the MPI operator's backoffLimit, JobSet's
	// failurePolicy.maxRestarts); 0: a failure ends the run. Default 3.
	MaxRestarts int `json:"maxRestarts"`
	// TerminationGracePeriodSeconds is the time a tower and the launcher get between SIGTERM (a
	// drain, a Spot reclaim, a deleted pod) and SIGKILL, for the ranks to write a checkpoint
	// (seconds); default 120, or the cloud's Spot notice on a Spot pool when shorter.
	TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
}

// ManagedResources are the resources the towers' own keys set, which towers.resources may not.
var ManagedResources = map[string]string{
	"cpu": Key + ".cpu", "memory": Key + ".memory", meta.GPUResource: Key + ".gpusPerTower",
	"vpc.amazonaws.com/efa": "nodePools[].fabric",
}

// DefaultImage is the towers' and the launcher's image when towers.image is empty, pinned by a
// tag that exists upstream (validation refuses tagless and :latest images).
const DefaultImage = "horovod/horovod:0.28.1"

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultTowers: two ranks are the smallest ring that exercises allreduce across hosts.
	DefaultTowers = 2
	// DefaultSSHPort: the horovod chart's sshd port; above 1024 so sshd needs no NET_BIND_SERVICE,
	// and a tower that runs as a user (kolotoc:runAsUser) may bind it.
	DefaultSSHPort = 2222
	// DefaultCPUTowerSlots: MPI slots of a CPU tower (gpusPerTower 0), one rank per host as the
	// old `--num-gpus 0` ran.
	DefaultCPUTowerSlots = 1
	// defaultTowerCPU, defaultTowerMemory: requests per tower (cores, bytes as quantity) that
	// leave room for the input pipeline; GPUs are requested separately.
	defaultTowerCPU    = "4"
	defaultTowerMemory = "16Gi"
	// defaultLauncherCPU, defaultLauncherMemory: requests of the launcher (cores, bytes), an ssh
	// client and mpirun that compute nothing.
	defaultLauncherCPU    = "500m"
	defaultLauncherMemory = "1Gi"
)

// DefaultLauncherCommand is the launcher's command when towers.command is empty: Horovod's
// synthetic benchmark over every slot of the hostfile, so that a new environment proves its
// ring works before any real job is written. KOLOTOC_NP and KOLOTOC_HOSTFILE are set by the
// launcher script.
var DefaultLauncherCommand = []string{
	"horovodrun", "-np", "$(KOLOTOC_NP)", "--hostfile", "$(KOLOTOC_HOSTFILE)",
	"python", "/horovod/examples/tensorflow2/tensorflow2_synthetic_benchmark.py",
}

// DefaultMaxRestarts: whole-ring restarts from the last checkpoint (count) before a run ends
// failed, as many as elastic.maxRestarts gives torchrun: a Spot reclaim or a node's loss in a
// day's run, not a crash loop.
const DefaultMaxRestarts = 3

// NewConfig is the section before the stack file is read: towers on, DefaultTowers of them,
// DefaultMaxRestarts (set before decoding, since a stack's explicit 0 restarts is valid and must
// be kept).
func NewConfig() Config {
	return Config{Enabled: true, Count: DefaultTowers, MaxRestarts: DefaultMaxRestarts}
}

// RunID is the run's id in the contract (KOLOTOC_RUN_ID, the checkpoint directory's name):
// towers.run, or meta.DefaultRunID when the stack sets none.
func (t Config) RunID() string {
	if t.Run != "" {
		return t.Run
	}
	return meta.DefaultRunID
}

// DefaultPools fills what the towers take from the stack's node pools: the first GPU pool, and
// that pool's GPUs per tower (0 on a CPU pool: CPU towers). Default follows it (slots follow
// gpusPerTower).
func (t *Config) DefaultPools(p meta.Pools) {
	meta.Fill(&t.Pool, p.First(true))
	meta.Fill(&t.GPUsPerTower, p.Get(t.Pool).GPUsPerNode)
}

// Default fills the zero values the ring decides alone, after DefaultPools (slots follow
// gpusPerTower); launcherPool is the entrypoint's pool, which the stack fills.
// It fills zero values only, so applying it twice changes nothing.
func (t *Config) Default() {
	slots := t.GPUsPerTower // one rank per GPU
	if slots == 0 {
		slots = DefaultCPUTowerSlots
	}
	meta.Fill(&t.Slots, slots)
	meta.Fill(&t.Image, DefaultImage)
	meta.FillSlice(&t.Command, DefaultLauncherCommand)
	meta.Fill(&t.SSHPort, DefaultSSHPort)
	meta.Fill(&t.CPU, defaultTowerCPU)
	meta.Fill(&t.Memory, defaultTowerMemory)
	meta.Fill(&t.ShmSize, t.Memory) // meta.ShmVolume says why
	meta.Fill(&t.LauncherCPU, defaultLauncherCPU)
	meta.Fill(&t.LauncherMemory, defaultLauncherMemory)
	meta.Fill(&t.LauncherImage, t.Image)
	meta.Fill(&t.TerminationGracePeriodSeconds, meta.DefaultTerminationGraceSeconds) // the stack fills a Spot pool's first
}

// Validate reports what is wrong with the towers' own settings, with their full keys. What
// depends on the node pools (the pool, gpusPerTower, the launcher's pool, whether the towers fit)
// and on the stack (the image's pin, hostnames in the namespace, runs) the stack checks.
func (t Config) Validate(p meta.Problems) {
	if t.Count < 1 {
		p.Add(Key+".count", strconv.Itoa(t.Count), "must be at least 1")
	}
	if t.Slots < 1 {
		p.Add(Key+".slots", strconv.Itoa(t.Slots), "must be at least 1")
	}
	if t.MaxRestarts < 0 {
		p.Add(Key+".maxRestarts", strconv.Itoa(t.MaxRestarts), "must be 0 or more")
	}
	if t.SSHPort < 1 || t.SSHPort > 65535 {
		p.Add(Key+".sshPort", strconv.Itoa(t.SSHPort), "allowed: 1..65535")
	}
	meta.CheckShm(p, Key+".shmSize", t.ShmSize, Key+".memory", t.Memory)
	t.Resources.Check(p, Key+".resources", ManagedResources)
	for i, arg := range t.Command {
		if strings.TrimSpace(arg) == "" {
			p.Add(fmt.Sprintf("%s.command[%d]", Key, i), strconv.Quote(arg), "empty argument")
		}
	}
}
