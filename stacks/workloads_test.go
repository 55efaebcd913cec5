package stacks_test

import (
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"kolotoc/components/dask"
	"kolotoc/components/elastic"
	"kolotoc/components/entrypoint"
	"kolotoc/components/etcd"
	"kolotoc/components/ring"
	"kolotoc/components/tfcluster"
)

// workloadsRaw is examples/workloads/Pulumi.workloads.yaml with its secrets set.
func workloadsRaw(t *testing.T) stacks.Raw {
	t.Helper()
	raw, err := stacks.ReadStackFile("../examples/workloads/Pulumi.workloads.yaml", "kolotoc", "workloads", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"jupyterPassword", "grafanaPassword"} {
		raw.Values["kolotoc:"+k] = testPassword
		raw.Secrets["kolotoc:"+k] = true
	}
	return raw
}

func TestWorkloadsExampleLoads(t *testing.T) {
	c, err := stacks.Load(workloadsRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Etcd.Enabled || !c.Elastic.Enabled || !c.TFCluster.Enabled || !c.Monitoring.Enabled {
		t.Errorf("the example enables every workload: etcd %v elastic %v tfcluster %v monitoring %v",
			c.Etcd.Enabled, c.Elastic.Enabled, c.TFCluster.Enabled, c.Monitoring.Enabled)
	}
	// Defaults the example leaves to the program.
	el := c.Elastic
	if el.Nodes != 2 || el.Pool != "gpu" || el.RdzvID != "kolotoc-workloads" || el.RdzvPort != elastic.DefaultRdzvPort || el.MaxRestarts != elastic.DefaultMaxRestarts {
		t.Errorf("elastic = %+v", el)
	}
	tf := c.TFCluster
	if tf.Chief.Count != 1 || tf.Evaluator.Count != 1 || tf.PS.Pool != "cpu" || tf.Workers.Pool != "gpu" || tf.Workers.GPUs != 4 || tf.Port != tfcluster.DefaultPort {
		t.Errorf("tfcluster = %+v", tf)
	}
	if c.Etcd.Pool != "cpu" || c.Etcd.Image != etcd.DefaultImage || c.Monitoring.Pool != "cpu" || !*c.Monitoring.DCGMExporter {
		t.Errorf("etcd %+v monitoring %+v", c.Etcd, c.Monitoring)
	}
	again := *c
	stacks.ApplyDefaults(&again)
	if !reflect.DeepEqual(&again, c) {
		t.Errorf("applyDefaults is not idempotent with the workloads:\n%+v\n%+v", again, *c)
	}

	// The local test bed's etcd image is tagged by content, not version: it is accepted.
	raw := workloadsRaw(t)
	raw.Values["kolotoc:etcd"] = `{"enabled":true,"members":3,"image":"kolotoc.local/etcd:98e957e15e76"}`
	if local, err := stacks.Load(raw); err != nil {
		t.Errorf("the local etcd image is refused: %v", err)
	} else if local.Etcd.Image != "kolotoc.local/etcd:98e957e15e76" || local.Etcd.Members != 3 {
		t.Errorf("etcd with the local image: %+v", local.Etcd)
	}
}

// TestWorkloadsOffByDefault: a stack that says nothing about them runs none of them and needs no
// Grafana password.
func TestWorkloadsOffByDefault(t *testing.T) {
	c, err := stacks.Load(devRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Etcd.Enabled || c.Elastic.Enabled || c.TFCluster.Enabled || c.Monitoring.Enabled {
		t.Error("a workload is on in the dev stack, which enables none")
	}
	c.Towers.Enabled, c.Carriers.Enabled = false, false // the two workloads dev runs
	if len(stacks.WorkloadOutputs(c, stacks.KubeAccess{})) != 0 {
		t.Errorf("outputs for workloads that are off: %v", stacks.WorkloadOutputs(c, stacks.KubeAccess{}))
	}
}

// TestExplicitZeros: 0 chiefs, evaluators, parameter servers or restarts are kept, not defaulted.
func TestExplicitZeros(t *testing.T) {
	raw := workloadsRaw(t)
	raw.Values["kolotoc:tfcluster"] = `{"enabled":true,"command":["python","/shared/train.py"],"chief":{"count":0},"evaluator":{"count":0},"ps":{"count":0},"workers":{"gpus":4}}`
	raw.Values["kolotoc:elastic"] = `{"enabled":true,"maxRestarts":0,"rdzvBackend":"etcd-v2"}`
	c, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	if tf := c.TFCluster; tf.Chief.Count != 0 || tf.Evaluator.Count != 0 || tf.PS.Count != 0 || tf.Workers.Count != tfcluster.DefaultWorkers {
		t.Errorf("tfcluster counts = chief %d evaluator %d ps %d workers %d", tf.Chief.Count, tf.Evaluator.Count, tf.PS.Count, tf.Workers.Count)
	}
	if c.Elastic.MaxRestarts != 0 {
		t.Errorf("elastic.maxRestarts = %d, want the explicit 0", c.Elastic.MaxRestarts)
	}
}

// TestWorkloadsRegisteredOnce: each workload's entry names a key of the Config once, the phases
// take them in the order of their sections in Config, and the phases reach every entry: its
// preset and defaults run in Load, its check in Validate.
func TestWorkloadsRegisteredOnce(t *testing.T) {
	workloads := stacks.Registered()
	if len(workloads) == 0 {
		t.Fatal("no workload registered")
	}
	// One entry package a workload, each registering its entry, each imported by
	// kolotoc/stacks/workloads: a package left out or whose init is lost would leave its workload
	// out of every phase.
	if dirs, _ := filepath.Glob("workloads/*/*.go"); len(dirs) != len(workloads) {
		t.Errorf("%d workloads registered, %d entry packages: %v", len(workloads), len(dirs), dirs)
	}
	for i, wl := range workloads {
		if !stacks.IsConfigKey(wl.Key) {
			t.Errorf("workload %s is no key of Config", wl.Key)
		}
		if i > 0 && stacks.ConfigIndex(workloads[i-1].Key) >= stacks.ConfigIndex(wl.Key) {
			t.Errorf("workload %s comes after %s, whose section follows its own in Config", wl.Key, workloads[i-1].Key)
		}
		if wl.Check == nil {
			t.Errorf("workload %s has no check: nothing of it would be validated in the stack's context", wl.Key)
		}
	}

	// What the order carries (workloads.go): a pool default taken from a section before, and
	// etcd registered before the elastic workers that wait for it (wiring.etcd). Defaults taken
	// in the second pass (the towers' launcher, the data-in Job and the monitoring from the
	// entrypoint's pool) follow every pool default, whatever the order.
	at, order := map[string]int{}, []string{}
	for i, wl := range workloads {
		at[wl.Key] = i
		order = append(order, wl.Key)
	}
	for _, p := range []struct{ before, after, why string }{
		{dask.CarriersKey, entrypoint.Key, "the entrypoint's pool defaults to the carriers'"},
		{etcd.Key, elastic.Key, "the elastic workers wait for etcd's StatefulSet"},
	} {
		if b, ok := at[p.before]; !ok || b > at[p.after] {
			t.Errorf("workload %s must come before %s (%s); order: %v", p.before, p.after, p.why, order)
		}
	}

	// A second entry for a key, or an entry for no key of Config, is refused at registration.
	saved := slices.Clone(workloads)
	for _, key := range []string{ring.Key, "nosuchsection"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) was accepted", key)
				}
			}()
			stacks.Register(&stacks.Workload{Key: key})
		}()
	}
	if now := stacks.Registered(); !slices.Equal(now, saved) {
		t.Errorf("a refused registration changed the workloads: %d entries, want %d", len(now), len(saved))
	}
}

// TestElasticDefaultsFollowThePool: the torchelastic seed's own machine, a p3.2xlarge (8 vCPUs,
// 61 GiB), holds no elastic worker of the defaults (8 CPUs, 64Gi): the defaults are cut to what
// its node gives a pod (7 cores, 45Gi) and the stack loads; on a large GPU machine they stand,
// and a worker size the stack sets is kept and checked as before (refused when too large).
func TestElasticDefaultsFollowThePool(t *testing.T) {
	load := func(pool, el string) (*stacks.Config, error) {
		raw := gpuRaw(t)
		raw.Values["kolotoc:nodePools"] = `[{"name":"gpu","nodes":2,"machineType":"` + pool + `"},{"name":"cpu","machineType":"n2-standard-16"}]`
		raw.Values["kolotoc:towers"] = `{"count":1,"pool":"gpu"}`
		raw.Values["kolotoc:elastic"] = el
		return stacks.Load(raw)
	}
	c, err := load("p3.2xlarge", `{"enabled":true,"pool":"gpu"}`)
	if err != nil {
		t.Fatalf("elastic with its defaults on p3.2xlarge: %v", err)
	}
	if c.Elastic.CPU != "7" || c.Elastic.Memory != "45Gi" {
		t.Errorf("elastic on p3.2xlarge: cpu %s, memory %s; want 7 and 45Gi", c.Elastic.CPU, c.Elastic.Memory)
	}
	if c, err = load("a2-highgpu-8g", `{"enabled":true,"pool":"gpu"}`); err != nil || c.Elastic.CPU != "8" || c.Elastic.Memory != "64Gi" {
		t.Errorf("elastic on a2-highgpu-8g: %v, cpu %s memory %s; want the defaults 8 and 64Gi", err, c.Elastic.CPU, c.Elastic.Memory)
	}
	if _, err = load("p3.2xlarge", `{"enabled":true,"pool":"gpu","memory":"64Gi"}`); err == nil || !strings.Contains(err.Error(), "kolotoc:elastic.memory = 64Gi: more than a node of pool \"gpu\" has (61Gi)") {
		t.Errorf("elastic with memory 64Gi set on p3.2xlarge: %v; want it refused, keyed", err)
	}
}
