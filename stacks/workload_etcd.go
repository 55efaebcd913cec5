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

func init() { register(etcdWorkload) } // in Config's order (workloads.go)

// etcd (kolotoc:etcd): the rendezvous store of the elastic workers (components/etcd).
var etcdWorkload = &workload{
	key:          etcd.Key,
	enabled:      func(c *Config) bool { return c.Etcd.Enabled },
	poolDefaults: func(c *Config, pools meta.Pools) { c.Etcd.DefaultPools(pools) },
	defaults:     func(c *Config) { c.Etcd.Default() }, // components/etcd/config.go
	check:        (*Config).validateEtcd,
	pools:        func(c *Config) []poolUse { return []poolUse{{c.Etcd.Pool, "etcd"}} },
	deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
		a := EtcdArgs(c)
		a.Site = w.site.WithPodDeps(w.pools...)
		if a.StaticVolumes {
			a.VolumeID = w.namespaceUID
		}
		e, err := etcd.New(ctx, "etcd", a, w.opts...)
		if err == nil {
			w.etcd = e.StatefulSet
		}
		return err
	},
	allows: func(c *Config) []isolation.Allow {
		var clients []string // the elastic workers, when their rendezvous is etcd
		if c.Elastic.Enabled && c.Elastic.RdzvBackend != elastic.BackendC10d {
			clients = append(clients, elastic.Component)
		}
		return etcd.Allows(clients) // client and peer ports
	},
	outputs: func(c *Config, _ KubeAccess) pulumi.Map { return etcd.Outputs(etcd.Name, c.Namespace) },
}

// EtcdArgs is the etcd component's configuration, less its site's namespace input and PodDeps.
// The simulated cloud has no volume provisioner: its members get static volumes unless a class
// is named.
func EtcdArgs(c *Config) *etcd.Args {
	return &etcd.Args{
		Config: c.Etcd, Site: workloadSite(c), Name: etcd.Name,
		StaticVolumes: c.Cloud == CloudSimulated && c.Etcd.StorageClass == "",
	}
}

func (c *Config) validateEtcd(v *validator) {
	e := c.Etcd
	if !e.Enabled {
		return
	}
	e.Validate(v) // the store's own settings (components/etcd/config.go)
	if v.image("etcd.image", e.Image); e.Image != "" && !strings.Contains(e.Image, "@sha256:") && !isLocalImage(e.Image) {
		if tag := imageTag(e.Image); tag != "" && tag != "latest" && !etcd.Is35(tag) {
			v.add("etcd.image", e.Image, "must be etcd 3.5.x (e.g. "+etcd.DefaultImage+"): etcd runs with --enable-v2=true, "+
				"which torch's etcd rendezvous needs and etcd 3.6 removed")
		}
	}
	v.cpuPool(c, "etcd.pool", e.Pool, "etcd", "etcd", e.CPU, e.Memory)
	v.quantity("etcd.storageSize", e.StorageSize)
	if e.Members > 0 {
		v.hostname("etcd.members", strconv.Itoa(e.Members), fmt.Sprintf("%s-%d", etcd.Name, e.Members-1), etcd.Name+"-peer", c.Namespace)
	}
}
