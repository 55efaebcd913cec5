package etcd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/elastic"
	"kolotoc/components/etcd"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/stacks"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// etcd (kolotoc:etcd): the rendezvous store of the elastic workers (components/etcd).
var entry = &stacks.Workload{
	Key:          etcd.Key,
	Enabled:      func(c *stacks.Config) bool { return c.Etcd.Enabled },
	PoolDefaults: func(c *stacks.Config, pools meta.Pools) { c.Etcd.DefaultPools(pools) },
	Defaults:     func(c *stacks.Config) { c.Etcd.Default() }, // components/etcd/config.go
	Check:        validateEtcd,
	Pools:        func(c *stacks.Config) []stacks.PoolUse { return []stacks.PoolUse{{Pool: c.Etcd.Pool, Who: "etcd"}} },
	Deploy: func(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
		a := Args(c)
		a.Site = w.Site.WithPodDeps(w.Pools...)
		if a.StaticVolumes {
			a.VolumeID = w.NamespaceUID
		}
		e, err := etcd.New(ctx, "etcd", a, w.Opts...)
		if err == nil {
			w.Etcd = e.StatefulSet
		}
		return err
	},
	Allows: func(c *stacks.Config) []isolation.Allow {
		var clients []string // the elastic workers, when their rendezvous is etcd
		if c.Elastic.Enabled && c.Elastic.RdzvBackend != elastic.BackendC10d {
			clients = append(clients, elastic.Component)
		}
		return etcd.Allows(clients) // client and peer ports
	},
	Outputs: func(c *stacks.Config, _ stacks.KubeAccess) pulumi.Map { return etcd.Outputs(etcd.Name, c.Namespace) },
}

// Args is the etcd component's configuration, less its site's namespace input and PodDeps.
// The simulated cloud has no volume provisioner: its members get static volumes unless a class
// is named.
func Args(c *stacks.Config) *etcd.Args {
	return &etcd.Args{
		Config: c.Etcd, Site: stacks.WorkloadSite(c), Name: etcd.Name,
		StaticVolumes: c.CloudEntry().Local && c.Etcd.StorageClass == "",
	}
}

func validateEtcd(c *stacks.Config, v *stacks.Validator) {
	e := c.Etcd
	if !e.Enabled {
		return
	}
	e.Validate(v) // the store's own settings (components/etcd/config.go)
	if v.Image("etcd.image", e.Image); e.Image != "" && !strings.Contains(e.Image, "@sha256:") && !stacks.IsLocalImage(e.Image) {
		if tag := stacks.ImageTag(e.Image); tag != "" && tag != "latest" && !etcd.Is35(tag) {
			v.Add("etcd.image", e.Image, "must be etcd 3.5.x (e.g. "+etcd.DefaultImage+"): etcd runs with --enable-v2=true, "+
				"which torch's etcd rendezvous needs and etcd 3.6 removed")
		}
	}
	v.CPUPool(c, "etcd.pool", e.Pool, "etcd", "etcd", e.CPU, e.Memory)
	v.Quantity("etcd.storageSize", e.StorageSize)
	if e.Members > 0 {
		v.Hostname("etcd.members", strconv.Itoa(e.Members), fmt.Sprintf("%s-%d", etcd.Name, e.Members-1), etcd.Name+"-peer", c.Namespace)
	}
}
