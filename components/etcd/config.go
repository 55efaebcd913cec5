package etcd

import (
	"fmt"
	"strconv"
	"strings"

	"kolotoc/components/meta"
)

// Key is the rendezvous store's config key, kolotoc:etcd: the prefix of every problem Validate
// reports.
const Key = "etcd"

// Config is the rendezvous store's config section, kolotoc:etcd, as the stack file says it: the
// YAML shape of the section, with each field's meaning and default. The stack fills the pool and
// checks the whole against the node pools before the members are registered.
type Config struct {
	Enabled      bool   `json:"enabled"`      // deploy etcd; default false
	Members      int    `json:"members"`      // members: 1 or 3; default 1
	Image        string `json:"image"`        // an etcd 3.5.x image (3.6 dropped the v2 API); default DefaultImage
	Pool         string `json:"pool"`         // node pool name (a CPU pool); default the first CPU pool
	CPU          string `json:"cpu"`          // CPU request per member as a quantity; default 500m
	Memory       string `json:"memory"`       // memory request and limit per member as a quantity; default 1Gi
	StorageSize  string `json:"storageSize"`  // volume per member as a quantity; default 10Gi
	StorageClass string `json:"storageClass"` // storage class of the members' volumes; default the cluster's default (simulated: static volumes)
}

// DefaultImage is the members' image when etcd.image is empty: etcd 3.5 (v3.5.17, 2024-11-12)
// is the last line with the v2 API, which Command enables for torch's etcd rendezvous.
const DefaultImage = "quay.io/coreos/etcd:v3.5.17"

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultMembers: one member is enough for a rendezvous store that holds no data worth
	// keeping; three survive a node's loss.
	DefaultMembers = 1
	// defaultCPU, defaultMemory, defaultStorageSize: requests (cores, bytes) and volume (bytes)
	// of a member; rendezvous is a few keys per round.
	defaultCPU         = "500m"
	defaultMemory      = "1Gi"
	defaultStorageSize = "10Gi"
)

// DefaultPools fills what the store takes from the stack's node pools: the first CPU pool.
func (e *Config) DefaultPools(p meta.Pools) { meta.Fill(&e.Pool, p.First(false)) }

// Default fills the zero values the store decides alone (DefaultPools fills the pool). It fills zero values only, so applying it twice changes nothing.
func (e *Config) Default() {
	meta.Fill(&e.Members, DefaultMembers)
	meta.Fill(&e.Image, DefaultImage)
	meta.Fill(&e.CPU, defaultCPU)
	meta.Fill(&e.Memory, defaultMemory)
	meta.Fill(&e.StorageSize, defaultStorageSize)
}

// Validate reports what is wrong with the store's own settings, with their full keys. What
// depends on the node pools (the pool, whether a member fits a node) and on the stack (the
// image's pin and version, hostnames in the namespace, the quantities' syntax) the stack checks.
func (e Config) Validate(p meta.Problems) {
	if e.Members != 1 && e.Members != 3 {
		msg := "allowed: 1, 3"
		if e.Members > 0 && e.Members%2 == 0 {
			msg = fmt.Sprintf("an even count tolerates no more failures than %d members and needs a larger quorum; allowed: 1, 3", e.Members-1)
		}
		p.Add(Key+".members", strconv.Itoa(e.Members), msg)
	}
}

// Is35 reports whether an etcd image tag is a 3.5 release (v3.5.17, or 3.5.16-0 as
// registry.k8s.io spells it): the line Kolotoc pins, the last whose members serve the v2 API
// that --enable-v2=true asks for and torch's etcd rendezvous speaks.
func Is35(tag string) bool {
	return strings.HasPrefix(strings.TrimPrefix(tag, "v"), "3.5.")
}
