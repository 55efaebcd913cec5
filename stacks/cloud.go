package stacks

import (
	"fmt"
	"slices"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cluster"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
)

// The clouds, registered once. Each declares its whole entry in its own package,
// stacks/clouds/<name> (gcp, aws, azure, existing, simulated), and registers it from its init
// with RegisterCloud, as the workloads register theirs (workloads.go): what kind of cluster it is,
// its section's defaults and checks, its machine catalogue, spot label and fabric rules, its file
// store (created and existing), the GPU agents it allows, and how its cluster is deployed and
// reached. Importing kolotoc/stacks/clouds registers them all. The stack asks the entry
// (Config.CloudEntry) instead of naming a cloud: no branch on kolotoc:cloud in this package
// (TestNoBranchOnTheCloud guards it). Adding a cloud is its components (components/cloud/<x>),
// its entry package, its name in config.go (Cloud* and cloudNames) and one import in
// stacks/clouds.

// clouds are the registered clouds, in the order of cloudNames (config.go). Filled by
// RegisterCloud, from the entry packages' init, before any phase runs; read through
// registeredClouds.
var clouds []*Cloud

// registeredClouds are the registered clouds. None means the program did not import
// kolotoc/stacks/clouds: every stack would be refused as naming no known cloud. That is the
// program's mistake, found by every test that loads a stack, so it panics.
func registeredClouds() []*Cloud {
	if len(clouds) == 0 {
		panic(`stacks: no cloud is registered; import _ "kolotoc/stacks/clouds" (main.go does)`)
	}
	return clouds
}

// RegisterCloud adds a cloud's entry to clouds, at the place of its name in cloudNames. Its name
// must be one of them, and registered once: a mistake here is the program's, so it panics.
func RegisterCloud(cl *Cloud) {
	i := slices.Index(cloudNames, cl.Name)
	if i < 0 {
		panic(fmt.Sprintf("cloud %q: not in stacks' cloudNames (config.go)", cl.Name))
	}
	at, found := slices.BinarySearchFunc(clouds, i, func(e *Cloud, index int) int {
		return slices.Index(cloudNames, e.Name) - index
	})
	if found {
		panic(fmt.Sprintf("cloud %q registered twice", cl.Name))
	}
	for name, m := range cl.Catalogue {
		m.Cloud = cl.Name
		cl.Catalogue[name] = m
	}
	clouds = slices.Insert(clouds, at, cl)
}

// Cloud is one cloud's entry. Every function may be nil: nothing of that kind.
type Cloud struct {
	Name string // its kolotoc:cloud value

	// Creates: Kolotoc creates the cluster, its node pools and its file store (gcp, aws,
	// azure). Local: the cluster is the local test bed's, its pools simulated Nodes, and it
	// mirrors the clouds that create theirs (their keys are accepted, their catalogues read, their
	// file stores stood in for). Neither: a cluster that exists already, reached through a
	// kubeconfig (existing; Given).
	Creates, Local bool

	// Catalogue: the machine types it offers, by name (catalogue.go); a simulated stack mirrors
	// every creating cloud's. AttachedGPUs checks the GPUs a pool attaches to one of them that
	// has none of its own (MachineType.Attach); NoGPUsHint ends the message refusing GPUs on a
	// machine type that has none. SpotLabel is the label key its spot nodes carry
	// (meta.SpotLabels), also on the simulated nodes mirroring them.
	Catalogue    Catalogue
	AttachedGPUs func(v *Validator, key string, p NodePool, m MachineType)
	NoGPUsHint   string
	SpotLabel    string
	// SpotNotice is how long its Spot nodes live after their reclaim notice (nil: not known): the
	// training workloads' grace period is cut to it on a Spot pool, and refused above it.
	SpotNotice *meta.SpotNotice
	// Fabric completes a pool's fabric for a machine type of its catalogue (fabric.go): its
	// compact placement and zone, its fast network; SpreadZones is how many zones a spread pool
	// of it may land in when the pool names none (0: unknown).
	Fabric      func(c *Config, p NodePool, m MachineType, f *PoolFabric)
	SpreadZones func(c *Config, p NodePool) int

	// DevicePlugins: who may run the device plugin on its GPU nodes (gpuagents.go), the first
	// its default; DevicePluginsWhy says why no other, for the error.
	DevicePlugins    []string
	DevicePluginsWhy string
	// KarpenterZones are the zones the local cluster's Karpenter offers its machine types in (the
	// regions the committed stacks and examples name, or Azure's zone numbers), for the simulated
	// pools at zero that mirror them (autoscale.go).
	KarpenterZones []string
	// ProvisioningClass is the ProvisioningRequest class through which its cluster provisions all
	// of an admitted workload's GPU nodes at once (queue.provisioning: queued), e.g. GKE's
	// queued-provisioning.gke.io; "" where it has none. Its Check checks the pools it needs.
	ProvisioningClass string
	// CiliumDataplane names the Cilium-based dataplane that enforces its cluster's
	// NetworkPolicies (GKE Dataplane V2, AKS's Azure CNI powered by Cilium); "" where another
	// enforcer does. Cilium counts a node's address as the host or a remote node, which no ipBlock
	// selects (https://docs.cilium.io/en/stable/network/kubernetes/policy/: nodes are selected by
	// CIDR only with policy-cidr-match-mode=nodes, which neither cloud sets), so a pod under an
	// egress policy reaches no host-network pod (hostnet.go).
	CiliumDataplane string
	// LoadBalancer is what its cluster puts in front of a LoadBalancer Service
	// (entrypoint.LoadBalancer*); "" the passthrough default.
	LoadBalancer string

	// Store is its own file store, nil for none (storage_cloud.go).
	Store *Store

	// Defaults fills its keys (kolotoc:cluster's, the pools') after the machine types'
	// figures, zero values only, on a stack of this cloud.
	Defaults func(c *Config)
	// Check checks its keys on every stack, of this cloud or another: what they must be here,
	// and that they are absent where they mean nothing (validateCloud).
	Check func(c *Config, v *Validator)

	// Deploy creates the cluster and the file store (Creates) and returns its kubeconfig, what
	// the workloads wait for and what the rest of the stack takes from it (clouds.go).
	Deploy func(ctx *pulumi.Context, c *Config) (pulumi.StringOutput, []pulumi.Resource, *CloudResult, error)
	// KubeconfigHint ends the error of a kubeconfig that cannot be read (not Creates).
	KubeconfigHint string
	// Nodes registers the cluster's nodes after the namespace (the simulated pools, deploy.go).
	Nodes func(ctx *pulumi.Context, c *Config, labels meta.Labels, provider *kubernetes.Provider) (*cluster.Simulated, error)
}

// Given reports whether the cloud is a cluster that exists already: registered, neither created
// nor local.
func (cl *Cloud) Given() bool { return cl.Name != "" && !cl.Creates && !cl.Local }

// Store is a cloud's own file store, for the storage.type it names (storage_cloud.go,
// storage_existing.go). Every function may be nil.
type Store struct {
	Type string // its kolotoc:storage.type
	// ExistingHint names the type with the key of an existing store, for the storage types an
	// existing cluster can mount; "" when there is no existing one.
	ExistingHint string
	// Existing reports whether the settings name a store that exists (an existing cluster or
	// this cloud then mounts it and never creates it).
	Existing func(s storage.Config) bool
	// Defaults fills its settings, zero values only, on a stack of this storage type (any cloud).
	Defaults func(c *Config)
	// Check checks its settings on every stack: what they must be with its type, and that
	// they are absent with another.
	Check func(c *Config, v *Validator)
	// Identity adds to the storage's identity (StorageIdentity) the keys whose change replaces
	// it, with its type; Older fills in what an update by an older version did not record.
	Identity func(c *Config, id map[string]string)
	Older    func(previous map[string]string) map[string]string
	// Mount points the shared volume at an existing store (applyExistingStorage).
	Mount func(c *Config, a *storage.Args)
	// NoBackup, if set, says why storage.backup cannot be turned on for it; Backup checks the
	// backup of a store it creates.
	NoBackup string
	Backup   func(c *Config, v *Validator)
}

// CloudEntry is the entry of the stack's cloud; an empty one (no name, no hooks) for a cloud
// that is not registered, which Validate refuses.
func (c *Config) CloudEntry() *Cloud {
	if cl := cloudNamed(c.Cloud); cl != nil {
		return cl
	}
	return &Cloud{}
}

// cloudNamed is the registered cloud of that name, or nil.
func cloudNamed(name string) *Cloud {
	for _, cl := range registeredClouds() {
		if cl.Name == name {
			return cl
		}
	}
	return nil
}

// storeCloud is the cloud whose own file store a storage type is, or nil for the
// cloud-independent types (nfs, inclusternfs, local).
func storeCloud(storageType string) *Cloud {
	for _, cl := range registeredClouds() {
		if cl.Store != nil && cl.Store.Type == storageType {
			return cl
		}
	}
	return nil
}

// cloudStores are the registered clouds' file stores, in order.
func cloudStores() []*Store {
	var out []*Store
	for _, cl := range registeredClouds() {
		if cl.Store != nil {
			out = append(out, cl.Store)
		}
	}
	return out
}

// localCloud is the name of the local test bed's cloud, for messages.
func localCloud() string {
	for _, cl := range registeredClouds() {
		if cl.Local {
			return cl.Name
		}
	}
	return ""
}

// IsCloud reports whether the stack's cloud is one whose cluster Kolotoc creates.
func IsCloud(cloud string) bool {
	cl := cloudNamed(cloud)
	return cl != nil && cl.Creates
}
