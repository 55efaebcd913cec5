package stacks

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/datain"
)

func init() { register(dataInWorkload) } // in Config's order (workloads.go)

// The data-in Job (kolotoc:dataIn): it puts the training data into the shared store before any
// training pod starts (components/datain); the workloads after it wait for it, the provider
// awaiting the Job until it completes.
var dataInWorkload = &workload{
	key:      datain.Key,
	enabled:  func(c *Config) bool { return c.DataIn.Enabled },
	defaults: func(c *Config) { c.DataIn.Default(c.Entrypoint.Pool) }, // beside the entrypoint unless said
	check:    (*Config).validateDataIn,
	pools:    func(c *Config) []poolUse { return []poolUse{{c.DataIn.Pool, "the data-in Job"}} },
	first:    true,
	deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
		a := DataInArgs(c)
		a.Site = w.site.WithPodDeps(w.mount...)
		job, err := datain.New(ctx, "data-in", a, w.opts...)
		if err != nil {
			return err
		}
		w.mount = append(append([]pulumi.Resource{}, w.mount...), job)
		return nil
	},
	outputs: func(c *Config, kube KubeAccess) pulumi.Map { return datain.Outputs(DataInArgs(c), kube.Kubectlf) },
}

// DataInArgs is the data-in Job's configuration, less its site's namespace input and PodDeps.
func DataInArgs(c *Config) *datain.Args {
	return &datain.Args{Config: c.DataIn, Site: workloadSite(c), Name: datain.Component}
}

// validateDataIn checks the data-in Job: its own settings, its image's pin, its command's
// arguments, its pool (a CPU pool it fits on), its run id and env.
func (c *Config) validateDataIn(v *validator) {
	d := c.DataIn
	if !d.Enabled {
		return
	}
	d.Validate(v) // components/datain
	if d.Image != "" {
		v.image(datain.Key+".image", d.Image)
	}
	v.args(datain.Key+".command", d.Command)
	if pool := v.pool(c, datain.Key+".pool", d.Pool, false); pool != nil {
		if pool.GPUsPerNode > 0 {
			v.add(datain.Key+".pool", d.Pool, fmt.Sprintf("is a GPU pool (tainted %s); the data-in Job needs a CPU pool", gpuTaint))
		}
		v.fits(datain.Key, pool, d.CPU, d.Memory)
	}
	v.runID(datain.Key+".run", d.Run)
	v.env(datain.Key+".env", d.Env, OwnSecrets())
}
