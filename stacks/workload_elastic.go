package stacks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/elastic"
	"kolotoc/components/etcd"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
)

func init() { register(elasticWorkload) } // in Config's order (workloads.go)

// The elastic workers (kolotoc:elastic): PyTorch training with torchrun (components/elastic),
// their rendezvous in worker 0 or in etcd (workload_etcd.go).
var elasticWorkload = &workload{
	key:          elastic.Key,
	enabled:      func(c *Config) bool { return c.Elastic.Enabled },
	preset:       func(c *Config) { c.Elastic = elastic.NewConfig() },
	poolDefaults: func(c *Config, pools meta.Pools) { c.Elastic.DefaultPools(pools) },
	defaults: func(c *Config) {
		if c.Stack != "" {
			meta.Fill(&c.Elastic.RdzvID, "kolotoc-"+strings.ToLower(c.Stack))
		}
		c.Elastic.Default() // components/elastic/config.go
	},
	onSuccess: func(c *Config) *string { return &c.Elastic.OnSuccess },
	check:     (*Config).validateElastic,
	pools:     func(c *Config) []poolUse { return []poolUse{{c.Elastic.Pool, "the elastic workers"}} },
	gpus: func(c *Config) []gpuDemand {
		return []gpuDemand{{who: "elastic", pods: c.Elastic.Nodes, gpus: c.Elastic.GPUsPerNode, pool: c.Elastic.Pool}}
	},
	env: func(c *Config) []envSetting { return []envSetting{{"elastic.env", c.Elastic.Env}} },
	gang: func(c *Config) *gangNeed {
		if c.Elastic.MinNodes < 1 {
			return nil
		}
		return &gangNeed{"elastic.minNodes", fmt.Sprint(c.Elastic.MinNodes),
			fmt.Sprintf("the elastic workers' group (minNodes = %d workers, admitted together)", c.Elastic.MinNodes), c.ElasticNeed()}
	},
	image: func(c *Config) string { return c.Elastic.Image },
	dirs: func(c *Config) []string {
		if c.Elastic.RdzvID == "" {
			return nil
		}
		return []string{"checkpoints/" + c.Elastic.RdzvID}
	},
	scratch: true,
	deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
		a := ElasticArgs(c)
		var deps []pulumi.Resource
		if a.RdzvBackend != elastic.BackendC10d && w.etcd != nil {
			// Workers started before etcd is ready would spend their join timeout failing.
			deps = append(deps, w.etcd)
		}
		a.Site = w.site.WithPodDeps(append(deps, w.mount...)...)
		_, err := elastic.New(ctx, "elastic", a, w.opts...)
		return err
	},
	allows:  func(*Config) []isolation.Allow { return elastic.Allows() }, // worker to worker, any port
	outputs: func(c *Config, kube KubeAccess) pulumi.Map { return elastic.Outputs(ElasticArgs(c), kube.Kubectlf) },
}

// ElasticArgs is the elastic workers' configuration, less their site's namespace input and
// PodDeps.
func ElasticArgs(c *Config) *elastic.Args {
	el := c.Elastic
	a := &elastic.Args{
		Config: el, Site: workloadSite(c), Name: elastic.Name,
		CPULimit:      gpuShareCPULimit(el.CPU, c.Pool(el.Pool), el.GPUsPerNode),
		CheckpointDir: fmt.Sprintf("%s/checkpoints/%s", c.Storage.MountPath, el.RdzvID),
	}
	a.Gang, a.ExtraPriority = c.elasticGang() // queue.go
	if el.RdzvBackend != elastic.BackendC10d {
		a.EtcdEndpoint = etcd.ClientEndpoint(etcd.Name, c.Namespace)
	}
	return a
}

func (c *Config) validateElastic(v *validator) {
	el := c.Elastic
	if !el.Enabled {
		return
	}
	el.Validate(v) // the workers' own settings (components/elastic/config.go)
	if (el.RdzvBackend == elastic.BackendEtcd || el.RdzvBackend == elastic.BackendEtcdV2) && !c.Etcd.Enabled {
		v.add("elastic.rdzvBackend", el.RdzvBackend, "needs the etcd component: set kolotoc:etcd.enabled true, or use rdzvBackend c10d")
	}
	v.image("elastic.image", el.Image)
	v.args("elastic.command", el.Command)
	if pool := v.pool(c, "elastic.pool", el.Pool, true); pool != nil {
		// On a CPU pool with gpusPerNode 0 the workers are CPU workers (one gloo process each):
		// there is no GPU to check.
		if pool.GPUsPerNode > 0 || el.GPUsPerNode != 0 {
			v.gpuPods(pool, "elastic", "elastic.pool", el.Pool, "elastic.gpusPerNode", el.GPUsPerNode, "elastic.nodes", el.Nodes, "workers")
		}
		v.fits("elastic", pool, el.CPU, el.Memory)
	}
	if n := max(el.Nodes, el.MaxNodes); n > 0 {
		v.hostname("elastic.maxNodes", strconv.Itoa(el.MaxNodes), fmt.Sprintf("%s-%d", elastic.Name, n-1), elastic.Name, c.Namespace)
	}
}
