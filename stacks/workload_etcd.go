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

func init() { Register(etcdWorkload) } // in Config's order (workloads.go)

// etcd (kolotoc:etcd): the rendezvous store of the elastic workers (components/etcd).
var etcdWorkload = &Workload{
	Key:          etcd.Key,
	Enabled:      func(c *Config) bool { return c.Etcd.Enabled },
	PoolDefaults: func(c *Config, pools meta.Pools) { c.Etcd.DefaultPools(pools) },
	Defaults:     func(c *Config) { c.Etcd.Default() }, // components/etcd/config.go
	Check:        (*Config).validateEtcd,
	Pools:        func(c *Config) []PoolUse { return []PoolUse{{c.Etcd.Pool, "etcd"}} },
	Deploy: func(ctx *pulumi.Context, c *Config, w *Wiring) error {
		a := EtcdArgs(c)
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
	Allows: func(c *Config) []isolation.Allow {
		var clients []string // the elastic workers, when their rendezvous is etcd
		if c.Elastic.Enabled && c.Elastic.RdzvBackend != elastic.BackendC10d {
			clients = append(clients, elastic.Component)
		}
		return etcd.Allows(clients) // client and peer ports
	},
	Outputs: func(c *Config, _ KubeAccess) pulumi.Map { return etcd.Outputs(etcd.Name, c.Namespace) },
}

// EtcdArgs is the etcd component's configuration, less its site's namespace input and PodDeps.
// The simulated cloud has no volume provisioner: its members get static volumes unless a class
// is named.
func EtcdArgs(c *Config) *etcd.Args {
	return &etcd.Args{
		Config: c.Etcd, Site: WorkloadSite(c), Name: etcd.Name,
		StaticVolumes: c.Cloud == CloudSimulated && c.Etcd.StorageClass == "",
	}
}

func (c *Config) validateEtcd(v *Validator) {
	e := c.Etcd
	if !e.Enabled {
		return
	}
	e.Validate(v) // the store's own settings (components/etcd/config.go)
	if v.Image("etcd.image", e.Image); e.Image != "" && !strings.Contains(e.Image, "@sha256:") && !IsLocalImage(e.Image) {
		if tag := ImageTag(e.Image); tag != "" && tag != "latest" && !etcd.Is35(tag) {
			v.add("etcd.image", e.Image, "must be etcd 3.5.x (e.g. "+etcd.DefaultImage+"): etcd runs with --enable-v2=true, "+
				"which torch's etcd rendezvous needs and etcd 3.6 removed")
		}
	}
	v.CPUPool(c, "etcd.pool", e.Pool, "etcd", "etcd", e.CPU, e.Memory)
	v.Quantity("etcd.storageSize", e.StorageSize)
	if e.Members > 0 {
		v.Hostname("etcd.members", strconv.Itoa(e.Members), fmt.Sprintf("%s-%d", etcd.Name, e.Members-1), etcd.Name+"-peer", c.Namespace)
	}
}
