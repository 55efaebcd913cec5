package stacks

import (
	"fmt"
	"strconv"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
)

func init() { Register(carriersWorkload) } // in Config's order (workloads.go)

// The carriers (kolotoc:carriers): Dask worker pods on a CPU pool (components/dask). Their
// allow spans the scheduler, the carriers and the sentinels: NetworkAllows (security.go).
var carriersWorkload = &Workload{
	Key:          dask.CarriersKey,
	Enabled:      func(c *Config) bool { return c.Carriers.Enabled },
	Preset:       func(c *Config) { c.Carriers = dask.NewCarriersConfig() },
	PoolDefaults: func(c *Config, pools meta.Pools) { c.Carriers.DefaultPools(pools) },
	Defaults:     func(c *Config) { c.Carriers.Default() }, // components/dask/config.go
	Check:        (*Config).validateCarriers,
	Pools:        func(c *Config) []PoolUse { return []PoolUse{{c.Carriers.Pool, "carriers"}} },
	Env:          func(c *Config) []EnvSetting { return []EnvSetting{{"carriers.env", c.Carriers.Env}} },
	Image:        func(c *Config) string { return c.Carriers.Image },
	Scratch:      true,
	Deploy: func(ctx *pulumi.Context, c *Config, w *Wiring) error {
		a := CarrierArgs(c)
		a.Site = w.Site.WithPodDeps(w.Mount...)
		_, err := dask.NewCarriers(ctx, "carriers", a, w.Opts...)
		return err
	},
	Outputs: func(c *Config, kube KubeAccess) pulumi.Map {
		return dask.Outputs(dask.CarrierName, c.Namespace, c.Carriers.Count, kube.Kubectlf)
	},
}

// CarrierArgs is the carriers' configuration, less their site's namespace input and PodDeps.
func CarrierArgs(c *Config) *dask.CarrierArgs {
	return &dask.CarrierArgs{
		CarriersConfig: c.Carriers, Site: WorkloadSite(c), Name: dask.CarrierName,
		Scheduler: entrypoint.SchedulerAddress(entrypoint.Name, c.Namespace),
	}
}

func (c *Config) validateCarriers(v *Validator) {
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
