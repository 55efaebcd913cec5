package tfcluster

import (
	"reflect"
	"testing"
)

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
		Enabled: true, Image: DefaultImage, Port: DefaultPort,
		PS:               Role{Count: DefaultPS, Pool: "cpu", CPU: defaultTaskCPU, Memory: defaultTaskMemory},
		Workers:          Role{Count: DefaultWorkers, Pool: "gpu", GPUs: 8, CPU: defaultWorkerCPU, Memory: defaultWorkerMemory},
		Chief:            Role{Count: DefaultChief, Pool: "cpu", CPU: defaultTaskCPU, Memory: defaultTaskMemory},
		Evaluator:        Role{Count: DefaultEvaluator, Pool: "cpu", CPU: defaultTaskCPU, Memory: defaultTaskMemory},
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
