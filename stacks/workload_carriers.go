package stacks

import (
	"fmt"
	"strconv"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
)

func init() { register(carriersWorkload) } // in Config's order (workloads.go)

// The carriers (kolotoc:carriers): Dask worker pods on a CPU pool (components/dask). Their
// allow spans the scheduler, the carriers and the sentinels: NetworkAllows (security.go).
var carriersWorkload = &workload{
	key:          dask.CarriersKey,
	enabled:      func(c *Config) bool { return c.Carriers.Enabled },
	preset:       func(c *Config) { c.Carriers = dask.NewCarriersConfig() },
	poolDefaults: func(c *Config, pools meta.Pools) { c.Carriers.DefaultPools(pools) },
	defaults:     func(c *Config) { c.Carriers.Default() }, // components/dask/config.go
	check:        (*Config).validateCarriers,
	pools:        func(c *Config) []poolUse { return []poolUse{{c.Carriers.Pool, "carriers"}} },
	env:          func(c *Config) []envSetting { return []envSetting{{"carriers.env", c.Carriers.Env}} },
	image:        func(c *Config) string { return c.Carriers.Image },
	scratch:      true,
	deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
		a := CarrierArgs(c)
		a.Site = w.site.WithPodDeps(w.mount...)
		_, err := dask.NewCarriers(ctx, "carriers", a, w.opts...)
		return err
	},
	outputs: func(c *Config, kube KubeAccess) pulumi.Map {
		return dask.Outputs(dask.CarrierName, c.Namespace, c.Carriers.Count, kube.Kubectlf)
	},
}

// CarrierArgs is the carriers' configuration, less their site's namespace input and PodDeps.
func CarrierArgs(c *Config) *dask.CarrierArgs {
	return &dask.CarrierArgs{
		CarriersConfig: c.Carriers, Site: workloadSite(c), Name: dask.CarrierName,
		Scheduler: entrypoint.SchedulerAddress(entrypoint.Name, c.Namespace),
	}
}

func (c *Config) validateCarriers(v *validator) {
	k := c.Carriers
	if !k.Enabled {
		return
	}
	k.Validate(v) // the carriers' own settings (components/dask/config.go)
	if pool := v.pool(c, "carriers.pool", k.Pool, false); pool != nil {
		v.fits("carriers", pool, k.CPU, k.Memory)
	}
	v.image("carriers.image", k.Image)
	if k.Count > 0 {
		v.hostname("carriers.count", strconv.Itoa(k.Count), fmt.Sprintf("%s-%d", dask.CarrierName, k.Count-1), dask.CarrierName, c.Namespace)
	}
}
