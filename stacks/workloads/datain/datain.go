package datain

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/datain"
	"kolotoc/stacks"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The data-in Job (kolotoc:dataIn): it puts the training data into the shared store before any
// training pod starts (components/datain); the workloads after it wait for it, the provider
// awaiting the Job until it completes.
var entry = &stacks.Workload{
	Key:      datain.Key,
	Enabled:  func(c *stacks.Config) bool { return c.DataIn.Enabled },
	Defaults: func(c *stacks.Config) { c.DataIn.Default(c.Entrypoint.Pool) }, // beside the entrypoint unless said
	Check:    validateDataIn,
	Pools: func(c *stacks.Config) []stacks.PoolUse {
		return []stacks.PoolUse{{Pool: c.DataIn.Pool, Who: "the data-in Job"}}
	},
	First: true,
	Deploy: func(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
		a := Args(c)
		a.Site = w.Site.WithPodDeps(w.Mount...)
		job, err := datain.New(ctx, "data-in", a, w.Opts...)
		if err != nil {
			return err
		}
		w.Mount = append(append([]pulumi.Resource{}, w.Mount...), job)
		return nil
	},
	Outputs: func(c *stacks.Config, kube stacks.KubeAccess) pulumi.Map {
		return datain.Outputs(Args(c), kube.Kubectlf)
	},
}

// Args is the data-in Job's configuration, less its site's namespace input and PodDeps.
func Args(c *stacks.Config) *datain.Args {
	return &datain.Args{Config: c.DataIn, Site: stacks.WorkloadSite(c), Name: datain.Component}
}

// validateDataIn checks the data-in Job: its own settings, its image's pin, its command's
// arguments, its pool (a CPU pool it fits on), its run id and env.
func validateDataIn(c *stacks.Config, v *stacks.Validator) {
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
			v.Add(datain.Key+".pool", d.Pool, fmt.Sprintf("is a GPU pool (tainted %s); the data-in Job needs a CPU pool", stacks.GPUTaint))
		}
		v.Fits(datain.Key, pool, d.CPU, d.Memory)
	}
	v.RunID(datain.Key+".run", d.Run)
	v.Env(datain.Key+".env", d.Env, stacks.OwnSecrets())
}
