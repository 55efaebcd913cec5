package sentinels

import (
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/stacks"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The sentinels (kolotoc:sentinels): Dask workers in a container beside each tower
// (components/dask), deployed with the towers (Beside, which the towers' deploy calls).
var entry = &stacks.Workload{
	Key:      dask.SentinelsKey,
	Enabled:  func(c *stacks.Config) bool { return c.Sentinels.Enabled },
	Defaults: func(c *stacks.Config) { c.Sentinels.Default() }, // the sentinels' are all their own
	Check:    validateSentinels,
}

func validateSentinels(c *stacks.Config, v *stacks.Validator) {
	s := c.Sentinels
	switch {
	case !c.Towers.Enabled:
		if s.Enabled {
			v.Add("sentinels.enabled", "true", "sentinels run beside towers; enable towers or turn sentinels off")
		}
	case s.Enabled:
		s.Validate(v) // the sentinels' own settings (components/dask/config.go)
		v.Quantity("sentinels.memory", s.Memory)
		v.Quantity("sentinels.cpu", s.CPU)
	case s.WatchProcesses:
		v.Add("sentinels.watchProcesses", "true", "shares a tower's processes with its sentinel; needs sentinels.enabled: true")
	}
	if c.Towers.Enabled && s.WatchGPUs && (!s.Enabled || !c.Monitoring.Enabled || !c.Monitoring.DCGMOn()) {
		v.Add("sentinels.watchGPUs", "true", "reads the node's GPU metrics from kolotoc:monitoring's DCGM exporter; "+
			"needs sentinels.enabled: true, monitoring.enabled: true and the exporter (monitoring.dcgmExporter, on by default with GPU pools)")
	}
}

// NodeGPUMetrics is where a sentinel watching GPUs reads its node's (sentinels.watchGPUs): the
// DCGM exporter's node-local Service; "" when the sentinels do not watch them.
func NodeGPUMetrics(c *stacks.Config) string {
	if !c.Sentinels.Enabled || !c.Sentinels.WatchGPUs || !c.Monitoring.Enabled || !c.Monitoring.DCGMOn() {
		return ""
	}
	return monitoring.NodeGPUMetricsURL(c.GPUAgentsNamespace()) // never "" with the exporter on
}

// Beside is the sentinel container the towers' deploy puts beside each tower, with the towers'
// site; ok is false when sentinels do not run. A sentinel is a Dask worker of the carriers'
// scheduler, the entrypoint's.
func Beside(c *stacks.Config, towers meta.Site) (sentinel corev1.ContainerArgs, ok bool) {
	if !c.Sentinels.Enabled {
		return corev1.ContainerArgs{}, false
	}
	return dask.Sentinel(c.Sentinels, c.Carriers, entrypoint.SchedulerAddress(entrypoint.Name, c.Namespace), towers, NodeGPUMetrics(c)), true
}
