package elastic

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
	"kolotoc/components/storage"
	"kolotoc/stacks"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The elastic workers (kolotoc:elastic): PyTorch training with torchrun (components/elastic),
// their rendezvous in worker 0 or in etcd (stacks/workloads/etcd).
var entry = &stacks.Workload{
	Key:          elastic.Key,
	Enabled:      func(c *stacks.Config) bool { return c.Elastic.Enabled },
	Preset:       func(c *stacks.Config) { c.Elastic = elastic.NewConfig() },
	PoolDefaults: func(c *stacks.Config, pools meta.Pools) { c.Elastic.DefaultPools(pools) },
	Defaults: func(c *stacks.Config) {
		if c.Stack != "" {
			meta.Fill(&c.Elastic.RdzvID, "kolotoc-"+strings.ToLower(c.Stack))
		}
		c.Elastic.Default() // components/elastic/config.go
		// The script's time to checkpoint at SIGTERM, within the pool's Spot notice.
		p := c.Pool(c.Elastic.Pool)
		meta.Fill(&c.Elastic.TerminationGracePeriodSeconds, meta.GraceDefault(c.CloudEntry().SpotNotice, p != nil && p.Spot))
	},
	OnSuccess: func(c *stacks.Config) *string { return &c.Elastic.OnSuccess },
	Check:     validateElastic,
	Pools: func(c *stacks.Config) []stacks.PoolUse {
		return []stacks.PoolUse{{Pool: c.Elastic.Pool, Who: "the elastic workers"}}
	},
	GPUs: func(c *stacks.Config) []stacks.GPUDemand {
		return []stacks.GPUDemand{{Who: "elastic", Pods: c.Elastic.Nodes, GPUs: c.Elastic.GPUsPerNode, Pool: c.Elastic.Pool, Spread: true}}
	},
	Env: func(c *stacks.Config) []stacks.EnvSetting {
		return []stacks.EnvSetting{{Key: "elastic.env", Env: c.Elastic.Env}}
	},
	Gang: func(c *stacks.Config) *stacks.GangNeed {
		if c.Elastic.MinNodes < 1 {
			return nil
		}
		return &stacks.GangNeed{Key: "elastic.minNodes", Value: fmt.Sprint(c.Elastic.MinNodes),
			What: fmt.Sprintf("the elastic workers' group (minNodes = %d workers, admitted together)", c.Elastic.MinNodes), Need: c.ElasticNeed()}
	},
	Image: func(c *stacks.Config) string { return c.Elastic.Image },
	Dirs: func(c *stacks.Config) []string {
		if c.Elastic.RdzvID == "" {
			return nil
		}
		return []string{"checkpoints/" + c.Elastic.RdzvID}
	},
	Scratch: true,
	Deploy: func(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
		a := Args(c)
		var deps []pulumi.Resource
		if a.RdzvBackend != elastic.BackendC10d && w.Etcd != nil {
			// Workers started before etcd is ready would spend their join timeout failing.
			deps = append(deps, w.Etcd)
		}
		a.Site = w.Site.WithPodDeps(append(deps, w.Mount...)...)
		_, err := elastic.New(ctx, "elastic", a, w.Opts...)
		return err
	},
	Allows: func(*stacks.Config) []isolation.Allow { return elastic.Allows() }, // worker to worker, any port
	Outputs: func(c *stacks.Config, kube stacks.KubeAccess) pulumi.Map {
		return elastic.Outputs(Args(c), kube.Kubectlf)
	},
}

// Args is the elastic workers' configuration, less their site's namespace input and
// PodDeps.
func Args(c *stacks.Config) *elastic.Args {
	el := c.Elastic
	a := &elastic.Args{
		Config: el, Site: stacks.WorkloadSite(c), Name: elastic.Name,
		CPULimit:      stacks.GPUShareCPULimit(el.CPU, c.Pool(el.Pool), el.GPUsPerNode),
		CheckpointDir: fmt.Sprintf("%s/checkpoints/%s", c.Storage.MountPath, el.RdzvID),
		Fabric:        c.PodFabric(el.Pool, el.GPUsPerNode), // EFA as the towers take it
	}
	a.Queue, a.ExtraPriority = elasticQueue(c)
	if el.RdzvBackend != elastic.BackendC10d {
		a.EtcdEndpoint = etcd.ClientEndpoint(etcd.Name, c.Namespace)
	}
	return a
}

func validateElastic(c *stacks.Config, v *stacks.Validator) {
	el := c.Elastic
	if !el.Enabled {
		return
	}
	el.Validate(v) // the workers' own settings (components/elastic/config.go)
	if (el.RdzvBackend == elastic.BackendEtcd || el.RdzvBackend == elastic.BackendEtcdV2) && !c.Etcd.Enabled {
		v.Add("elastic.rdzvBackend", el.RdzvBackend, "needs the etcd component: set kolotoc:etcd.enabled true, or use rdzvBackend c10d")
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
		meta.CheckGrace(v, "elastic.terminationGracePeriodSeconds", el.TerminationGracePeriodSeconds, c.Cloud, c.CloudEntry().SpotNotice, pool.Spot, pool.Name)
		// torchrun's restarts resume from the checkpoint every worker must read.
		if nodes := poolNodes(pool); el.MaxRestarts > 0 && !storage.SharedAcross(c.Storage.Type, nodes) {
			v.Add("elastic.maxRestarts", strconv.Itoa(el.MaxRestarts), fmt.Sprintf(
				"a restart resumes from the checkpoint on the shared store, and storage.type local is a directory of each node, which pool %q's %d nodes do not share; "+
					"allowed: 0, or a store every node mounts (storage.type in-cluster-nfs, nfs or the cloud's)", pool.Name, nodes))
		}
	}
	if n := max(el.Nodes, el.MaxNodes); n > 0 {
		v.Hostname("elastic.maxNodes", strconv.Itoa(el.MaxNodes), fmt.Sprintf("%s-%d", elastic.Name, n-1), elastic.Name, c.Namespace)
	}
}

// poolNodes is the most nodes a pool can have: the test bed's real node(s) count as one.
func poolNodes(p *stacks.NodePool) int {
	if p.Real {
		return 1
	}
	return max(p.Nodes, p.MaxNodes)
}

// elasticQueue queues the elastic workers when the stack has a queue: the first minNodes
// workers' StatefulSet as one unit (meta.SetGang; a lost worker's replacement rejoins under the
// same admission), and the priority class of the workers above minNodes, each admitted on its
// own below the set's priority ("" when there are none).
func elasticQueue(c *stacks.Config) (*meta.SetGang, string) {
	if !c.Queue.On() {
		return nil, ""
	}
	g := &meta.SetGang{Queue: c.Queue.LocalQueue}
	if _, ok := c.Queue.Priorities["elastic"]; ok {
		g.Priority = queue.PriorityClass(c.Namespace, "elastic")
	}
	if c.ElasticExtras() {
		return g, queue.PriorityClass(c.Namespace, queue.ElasticExtra)
	}
	return g, ""
}
