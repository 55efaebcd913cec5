package stacks

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/datain"
)

func init() { Register(dataInWorkload) } // in Config's order (workloads.go)

// The data-in Job (kolotoc:dataIn): it puts the training data into the shared store before any
// training pod starts (components/datain); the workloads after it wait for it, the provider
// awaiting the Job until it completes.
var dataInWorkload = &Workload{
	Key:      datain.Key,
	Enabled:  func(c *Config) bool { return c.DataIn.Enabled },
	Defaults: func(c *Config) { c.DataIn.Default(c.Entrypoint.Pool) }, // beside the entrypoint unless said
	Check:    (*Config).validateDataIn,
	Pools:    func(c *Config) []PoolUse { return []PoolUse{{c.DataIn.Pool, "the data-in Job"}} },
	First:    true,
	Deploy: func(ctx *pulumi.Context, c *Config, w *Wiring) error {
		a := DataInArgs(c)
		a.Site = w.Site.WithPodDeps(w.Mount...)
		job, err := datain.New(ctx, "data-in", a, w.Opts...)
		if err != nil {
			return err
		}
		w.Mount = append(append([]pulumi.Resource{}, w.Mount...), job)
		return nil
	},
	Outputs: func(c *Config, kube KubeAccess) pulumi.Map { return datain.Outputs(DataInArgs(c), kube.Kubectlf) },
}

// DataInArgs is the data-in Job's configuration, less its site's namespace input and PodDeps.
func DataInArgs(c *Config) *datain.Args {
	return &datain.Args{Config: c.DataIn, Site: WorkloadSite(c), Name: datain.Component}
}

// validateDataIn checks the data-in Job: its own settings, its image's pin, its command's
// arguments, its pool (a CPU pool it fits on), its run id and env.
func (c *Config) validateDataIn(v *Validator) {
	d := c.DataIn
	if !d.Enabled {
		return
	}
	d.Validate(v) // components/datain
	if d.Image != "" {
		v.Image(datain.Key+".image", d.Image)
	}
	v.Args(datain.Key+".command", d.Command)
	if pool := v.Pool(c, datain.Key+".pool", d.Pool, false); pool != nil {
		if pool.GPUsPerNode > 0 {
			v.add(datain.Key+".pool", d.Pool, fmt.Sprintf("is a GPU pool (tainted %s); the data-in Job needs a CPU pool", GPUTaint))
		}
		v.Fits(datain.Key, pool, d.CPU, d.Memory)
	}
	v.RunID(datain.Key+".run", d.Run)
	v.Env(datain.Key+".env", d.Env, OwnSecrets())
}
