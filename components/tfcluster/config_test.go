package tfcluster

import (
	"reflect"
	"testing"

	"kolotoc/components/meta/problemtest"
)

// report is what Validate reports of c, in its order.
func report(c Config) []string { return problemtest.Report(c.Validate) }

// TestConfigDefault: a section that says nothing but what the stack fills (the pools, the
// workers' GPUs, the TensorBoard's image) gets the tfcluster package's task counts and defaults,
// the workers' requests larger than the other tasks'; a second Default changes nothing, nor does
// it touch what the stack file says.
func TestConfigDefault(t *testing.T) {
	c := NewConfig()
	c.Enabled, c.Workers.Pool, c.Workers.GPUs, c.TensorBoardImage = true, "gpu", 8, "tensorflow/tensorflow:2.17.0" // the stack's
	for _, r := range []*Role{&c.PS, &c.Chief, &c.Evaluator} {
		r.Pool = "cpu"
	}
	c.Default()
	on := true
	want := Config{
		Enabled: true, Image: DefaultImage, Port: DefaultPort, CheckpointDir: DefaultCheckpointDir, LogDir: DefaultLogDir,
		PS:               Role{Count: DefaultPS, Pool: "cpu", CPU: defaultTaskCPU, Memory: defaultTaskMemory, ShmSize: defaultTaskMemory, Image: DefaultImage},
		Workers:          Role{Count: DefaultWorkers, Pool: "gpu", GPUs: 8, CPU: defaultWorkerCPU, Memory: defaultWorkerMemory, ShmSize: defaultWorkerMemory, Image: DefaultImage},
		Chief:            Role{Count: DefaultChief, Pool: "cpu", CPU: defaultTaskCPU, Memory: defaultTaskMemory, ShmSize: defaultTaskMemory, Image: DefaultImage},
		Evaluator:        Role{Count: DefaultEvaluator, Pool: "cpu", CPU: defaultTaskCPU, Memory: defaultTaskMemory, ShmSize: defaultTaskMemory, Image: DefaultImage},
		TensorBoard:      &on,
		TensorBoardImage: "tensorflow/tensorflow:2.17.0",
	}
	for _, after := range []string{"Default", "a second Default"} {
		if !reflect.DeepEqual(c, want) {
			t.Errorf("after %s:\n got %+v\nwant %+v", after, c, want)
		}
		c.Default() // fills zero values only: nothing is left to fill
	}

	off := false
	set := Config{
		Image: "tensorflow/tensorflow:2.16.1-gpu", Port: 3333, TensorBoard: &off,
		Workers: Role{CPU: "16", Memory: "64Gi"}, PS: Role{CPU: "1", Memory: "2Gi"},
	}
	kept := set
	kept.Default()
	if kept.Image != set.Image || kept.Port != set.Port || *kept.TensorBoard ||
		kept.Workers.CPU != "16" || kept.Workers.Memory != "64Gi" || kept.PS.CPU != "1" || kept.PS.Memory != "2Gi" {
		t.Errorf("Default overwrote what the stack file says: %+v became %+v", set, kept)
	}
	zero := Config{} // as a stack file that says 0 of every task type leaves it
	zero.Default()
	for _, r := range zero.Roles() {
		if r.Role.Count != 0 {
			t.Errorf("Default turned an explicit 0 %s into %d; only NewConfig presets the counts", r.Key, r.Role.Count)
		}
	}
}

// TestConfigValidate: the defaulted section passes, as does one with a program of its own and
// only workers; each bad setting is reported with its full key, the value and what is allowed;
// what the built-in program needs is asked only when no command is given, and a task type's GPUs
// only when it runs.
func TestConfigValidate(t *testing.T) {
	c := NewConfig()
	c.Workers.Pool, c.Workers.GPUs = "gpu", 8 // the stack's
	c.Default()
	own := c
	own.Command, own.Chief.Count, own.PS.Count, own.Evaluator.Count = []string{"python", "/shared/train.py"}, 0, 0, 0
	for name, ok := range map[string]Config{"defaulted": c, "own program, workers only": own} {
		if got := report(ok); len(got) != 0 {
			t.Errorf("%s section reported %v", name, got)
		}
	}

	const (
		chiefNeeded = "tfcluster.chief.count=0: the built-in program coordinates from the chief; allowed: 1, or set tfcluster.command to your own program"
		psNeeded    = "tfcluster.ps.count=0: the built-in program keeps its variables on parameter servers; allowed: 1 or more, or set tfcluster.command to your own program"
	)
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"no workers", func(c *Config) { c.Workers.Count = 0 },
			[]string{"tfcluster.workers.count=0: a TensorFlow cluster needs at least one worker; allowed: 1 or more"}},
		{"negative ps", func(c *Config) { c.PS.Count = -1 }, []string{
			"tfcluster.ps.count=-1: must be 0 or more",
			"tfcluster.ps.count=-1: the built-in program keeps its variables on parameter servers; allowed: 1 or more, or set tfcluster.command to your own program"}},
		{"two chiefs", func(c *Config) { c.Chief.Count = 2 }, []string{
			"tfcluster.chief.count=2: allowed: 0, 1",
			"tfcluster.chief.count=2: the built-in program coordinates from the chief; allowed: 1, or set tfcluster.command to your own program"}},
		{"two evaluators", func(c *Config) { c.Evaluator.Count = 2 }, []string{"tfcluster.evaluator.count=2: allowed: 0, 1"}},
		{"no evaluator", func(c *Config) { c.Evaluator.Count = 0 }, nil},
		{"built-in program without a chief", func(c *Config) { c.Chief.Count = 0 }, []string{chiefNeeded}},
		{"built-in program without a ps", func(c *Config) { c.PS.Count = 0 }, []string{psNeeded}},
		{"own program without a chief or a ps", func(c *Config) { c.Command, c.Chief.Count, c.PS.Count = []string{"python", "train.py"}, 0, 0 }, nil},
		{"port out of range", func(c *Config) { c.Port = 70000 }, []string{"tfcluster.port=70000: allowed: 1..65535"}},
		{"no port", func(c *Config) { c.Port = 0 }, []string{"tfcluster.port=0: allowed: 1..65535"}},
		{"negative gpus", func(c *Config) { c.Workers.GPUs, c.PS.GPUs = -1, -2 }, []string{
			"tfcluster.workers.gpus=-1: must be 0 (a CPU task) or more",
			"tfcluster.ps.gpus=-2: must be 0 (a CPU task) or more"}},
		{"negative gpus of a task type that does not run", func(c *Config) { c.Evaluator.Count, c.Evaluator.GPUs = 0, -1 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c
			tc.edit(&bad)
			if got := report(bad); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
		})
	}
}
