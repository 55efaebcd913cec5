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
	"kolotoc/components/queue"
)

func init() { Register(elasticWorkload) } // in Config's order (workloads.go)

// The elastic workers (kolotoc:elastic): PyTorch training with torchrun (components/elastic),
// their rendezvous in worker 0 or in etcd (workload_etcd.go).
var elasticWorkload = &Workload{
	Key:          elastic.Key,
	Enabled:      func(c *Config) bool { return c.Elastic.Enabled },
	Preset:       func(c *Config) { c.Elastic = elastic.NewConfig() },
	PoolDefaults: func(c *Config, pools meta.Pools) { c.Elastic.DefaultPools(pools) },
	Defaults: func(c *Config) {
		if c.Stack != "" {
			meta.Fill(&c.Elastic.RdzvID, "kolotoc-"+strings.ToLower(c.Stack))
		}
		c.Elastic.Default() // components/elastic/config.go
	},
	OnSuccess: func(c *Config) *string { return &c.Elastic.OnSuccess },
	Check:     (*Config).validateElastic,
	Pools:     func(c *Config) []PoolUse { return []PoolUse{{c.Elastic.Pool, "the elastic workers"}} },
	GPUs: func(c *Config) []GPUDemand {
		return []GPUDemand{{Who: "elastic", Pods: c.Elastic.Nodes, GPUs: c.Elastic.GPUsPerNode, Pool: c.Elastic.Pool}}
	},
	Env: func(c *Config) []EnvSetting { return []EnvSetting{{"elastic.env", c.Elastic.Env}} },
	Gang: func(c *Config) *GangNeed {
		if c.Elastic.MinNodes < 1 {
			return nil
		}
		return &GangNeed{"elastic.minNodes", fmt.Sprint(c.Elastic.MinNodes),
			fmt.Sprintf("the elastic workers' group (minNodes = %d workers, admitted together)", c.Elastic.MinNodes), c.ElasticNeed()}
	},
	Image: func(c *Config) string { return c.Elastic.Image },
	Dirs: func(c *Config) []string {
		if c.Elastic.RdzvID == "" {
			return nil
		}
		return []string{"checkpoints/" + c.Elastic.RdzvID}
	},
	Scratch: true,
	Deploy: func(ctx *pulumi.Context, c *Config, w *Wiring) error {
		a := ElasticArgs(c)
		var deps []pulumi.Resource
		if a.RdzvBackend != elastic.BackendC10d && w.Etcd != nil {
			// Workers started before etcd is ready would spend their join timeout failing.
			deps = append(deps, w.Etcd)
		}
		a.Site = w.Site.WithPodDeps(append(deps, w.Mount...)...)
		_, err := elastic.New(ctx, "elastic", a, w.Opts...)
		return err
	},
	Allows:  func(*Config) []isolation.Allow { return elastic.Allows() }, // worker to worker, any port
	Outputs: func(c *Config, kube KubeAccess) pulumi.Map { return elastic.Outputs(ElasticArgs(c), kube.Kubectlf) },
}

// ElasticArgs is the elastic workers' configuration, less their site's namespace input and
// PodDeps.
func ElasticArgs(c *Config) *elastic.Args {
	el := c.Elastic
	a := &elastic.Args{
		Config: el, Site: WorkloadSite(c), Name: elastic.Name,
		CPULimit:      GPUShareCPULimit(el.CPU, c.Pool(el.Pool), el.GPUsPerNode),
		CheckpointDir: fmt.Sprintf("%s/checkpoints/%s", c.Storage.MountPath, el.RdzvID),
	}
	a.Gang, a.ExtraPriority = c.elasticGang() // queue.go
	if el.RdzvBackend != elastic.BackendC10d {
		a.EtcdEndpoint = etcd.ClientEndpoint(etcd.Name, c.Namespace)
	}
	return a
}

func (c *Config) validateElastic(v *Validator) {
	el := c.Elastic
	if !el.Enabled {
		return
	}
	el.Validate(v) // the workers' own settings (components/elastic/config.go)
	if (el.RdzvBackend == elastic.BackendEtcd || el.RdzvBackend == elastic.BackendEtcdV2) && !c.Etcd.Enabled {
		v.add("elastic.rdzvBackend", el.RdzvBackend, "needs the etcd component: set kolotoc:etcd.enabled true, or use rdzvBackend c10d")
	}
	v.Image("elastic.image", el.Image)
	v.Args("elastic.command", el.Command)
	if pool := v.Pool(c, "elastic.pool", el.Pool, true); pool != nil {
		// On a CPU pool with gpusPerNode 0 the workers are CPU workers (one gloo process each):
		// there is no GPU to check.
		if pool.GPUsPerNode > 0 || el.GPUsPerNode != 0 {
			v.GPUPods(pool, "elastic", "elastic.pool", el.Pool, "elastic.gpusPerNode", el.GPUsPerNode, "elastic.nodes", el.Nodes, "workers")
		}
		v.Fits("elastic", pool, el.CPU, el.Memory)
	}
	if n := max(el.Nodes, el.MaxNodes); n > 0 {
		v.Hostname("elastic.maxNodes", strconv.Itoa(el.MaxNodes), fmt.Sprintf("%s-%d", elastic.Name, n-1), elastic.Name, c.Namespace)
	}
}

// elasticGang is the elastic workers' pod group when the stack queues them: the first minNodes
// workers, a serving group (a lost worker's replacement rejoins it), and the priority class of
// the workers above minNodes, each admitted on its own below the group's priority ("" when
// there are none).
func (c *Config) elasticGang() (*meta.Gang, string) {
	if !c.Queue.On() {
		return nil, ""
	}
	g := &meta.Gang{Queue: c.Queue.LocalQueue, Group: meta.GroupName(elastic.Name, ""), Total: c.Elastic.MinNodes, Serving: true}
	if _, ok := c.Queue.Priorities["elastic"]; ok {
		g.Priority = queue.PriorityClass(c.Namespace, "elastic")
	}
	if c.ElasticExtras() {
		return g, queue.PriorityClass(c.Namespace, queue.ElasticExtra)
	}
	return g, ""
}
