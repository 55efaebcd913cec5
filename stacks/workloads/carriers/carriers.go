package carriers

import (
	"fmt"
	"strconv"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
	"kolotoc/stacks"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The carriers (kolotoc:carriers): Dask worker pods on a CPU pool (components/dask). Their
// allow spans the scheduler, the carriers and the sentinels: NetworkAllows (stacks/security.go).
var entry = &stacks.Workload{
	Key:          dask.CarriersKey,
	Enabled:      func(c *stacks.Config) bool { return c.Carriers.Enabled },
	Preset:       func(c *stacks.Config) { c.Carriers = dask.NewCarriersConfig() },
	PoolDefaults: func(c *stacks.Config, pools meta.Pools) { c.Carriers.DefaultPools(pools) },
	Defaults:     func(c *stacks.Config) { c.Carriers.Default() }, // components/dask/config.go
	Check:        validateCarriers,
	Pools: func(c *stacks.Config) []stacks.PoolUse {
		return []stacks.PoolUse{{Pool: c.Carriers.Pool, Who: "carriers"}}
	},
	Env: func(c *stacks.Config) []stacks.EnvSetting {
		return []stacks.EnvSetting{{Key: "carriers.env", Env: c.Carriers.Env}}
	},
	Image:   func(c *stacks.Config) string { return c.Carriers.Image },
	Scratch: true,
	Deploy: func(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
		a := Args(c)
		a.Site = w.Site.WithPodDeps(w.Mount...)
		_, err := dask.NewCarriers(ctx, "carriers", a, w.Opts...)
		return err
	},
	Outputs: func(c *stacks.Config, kube stacks.KubeAccess) pulumi.Map {
		return dask.Outputs(dask.CarrierName, c.Namespace, c.Carriers.Count, kube.Kubectlf)
	},
}

// Args is the carriers' configuration, less their site's namespace input and PodDeps.
func Args(c *stacks.Config) *dask.CarrierArgs {
	return &dask.CarrierArgs{
		CarriersConfig: c.Carriers, Site: stacks.WorkloadSite(c), Name: dask.CarrierName,
		Scheduler: entrypoint.SchedulerAddress(entrypoint.Name, c.Namespace),
	}
}

func validateCarriers(c *stacks.Config, v *stacks.Validator) {
	k := c.Carriers
	if !k.Enabled {
		return
	}
	k.Validate(v) // the carriers' own settings (components/dask/config.go)
	if pool := v.Pool(c, "carriers.pool", k.Pool, false); pool != nil {
		v.Fits("carriers", pool, k.CPU, k.Memory)
	}
	v.Image("carriers.image", k.Image)
	if k.Count > 0 {
		v.Hostname("carriers.count", strconv.Itoa(k.Count), fmt.Sprintf("%s-%d", dask.CarrierName, k.Count-1), dask.CarrierName, c.Namespace)
	}
}
