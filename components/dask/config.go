package dask

import (
	"fmt"
	"strconv"

	"kolotoc/components/meta"
)

// Config keys of the two sections, kolotoc:carriers and kolotoc:sentinels: the prefixes of every
// problem Validate reports.
const (
	CarriersKey  = "carriers"
	SentinelsKey = "sentinels"
)

// CarriersConfig is the carriers' config section, kolotoc:carriers, as the stack file says it:
// the YAML shape of the section, with each field's meaning and default. The stack fills the
// pool-dependent defaults and checks the whole against the node pools before the carriers are
// registered.
type CarriersConfig struct {
	Enabled           bool              `json:"enabled"`           // deploy carriers at all; default true
	Count             int               `json:"count"`             // carrier pods, at least 1; default 1
	WorkersPerCarrier int               `json:"workersPerCarrier"` // dask worker processes per carrier; default the pool's cpus (one per logical core)
	Pool              string            `json:"pool"`              // node pool name; default the first CPU pool
	Image             string            `json:"image"`             // the carriers' Dask image, pinned by tag; default DefaultImage
	Memory            string            `json:"memory"`            // memory per carrier as a quantity; default 8Gi
	CPU               string            `json:"cpu"`               // CPU request per carrier as a quantity (the limit is workersPerCarrier cores); default 1
	Env               []meta.EnvSetting `json:"env"`               // environment of the carriers and the sentinels (runs.go)
}

// SentinelsConfig is the sentinels' config section, kolotoc:sentinels: Dask workers running
// beside each tower. Whether towers run at all is the stack's to check.
type SentinelsConfig struct {
	Enabled bool   `json:"enabled"` // default false
	Threads int    `json:"threads"` // threads per sentinel worker; default 2
	Memory  string `json:"memory"`  // memory limit per sentinel; default 4Gi
	CPU     string `json:"cpu"`     // CPU request per sentinel as a quantity (the limit is threads cores); default 500m
	// WatchProcesses: share the tower pod's process namespace with its sentinel, so that the
	// sentinel sees the tower's processes (the old chart's sentinels watched the machine during
	// training); default false. What else it then sees: docs/migrating-features.md.
	WatchProcesses bool `json:"watchProcesses"`
	// WatchGPUs: give each sentinel its node's GPU state: the DCGM exporter's metrics of the node
	// it runs on (utilisation, memory, temperature, XID errors, per GPU and pod), at the URL in
	// $KOLOTOC_NODE_GPU_METRICS, a node-local Service of kolotoc:monitoring's exporter; default
	// false. Needs the exporter (monitoring.enabled on a stack with GPU pools).
	WatchGPUs bool `json:"watchGPUs"`
}

// DefaultImage is the carriers' and the sentinels' image when carriers.image is empty, pinned by
// a tag that exists upstream (validation refuses tagless and :latest images). The stack gives the
// entrypoint's scheduler the same one by default: Dask wants one version on both sides.
const DefaultImage = "ghcr.io/dask/dask:2024.8.0-py3.11"

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultCarriers: one Dask carrier, as the old cluster.sh started by default.
	DefaultCarriers = 1
	// defaultCarrierMemory: memory per carrier pod (quantity), split among its worker processes.
	defaultCarrierMemory = "8Gi"
	// defaultCarrierCPU: cores a carrier requests. Its worker processes share the node's cores
	// (the limit is one per process); requesting them all would leave no room for the entrypoint
	// on a one-node pool.
	defaultCarrierCPU = "1"
	// DefaultSentinelThreads, defaultSentinelMemory, defaultSentinelCPU: threads, bytes and cores
	// of a sentinel; it shares its tower's node, so it is small.
	DefaultSentinelThreads = 2
	defaultSentinelMemory  = "4Gi"
	defaultSentinelCPU     = "500m"
)

// NewCarriersConfig is the section before the stack file is read: carriers on, DefaultCarriers
// of them.
func NewCarriersConfig() CarriersConfig {
	return CarriersConfig{Enabled: true, Count: DefaultCarriers}
}

// DefaultPools fills what the carriers take from the stack's node pools: the first CPU pool, and
// one worker process per logical core of its nodes.
func (k *CarriersConfig) DefaultPools(p meta.Pools) {
	meta.Fill(&k.Pool, p.First(false))
	meta.Fill(&k.WorkersPerCarrier, p.Get(k.Pool).CPUs)
}

// Default fills the zero values the carriers decide alone (DefaultPools fills the pool and
// workersPerCarrier). It fills zero values only, so applying it twice changes nothing.
func (k *CarriersConfig) Default() {
	meta.Fill(&k.Image, DefaultImage)
	meta.Fill(&k.Memory, defaultCarrierMemory)
	meta.Fill(&k.CPU, defaultCarrierCPU)
}

// Default fills the sentinels' zero values; applying it twice changes nothing. Their image is
// the carriers'.
func (s *SentinelsConfig) Default() {
	meta.Fill(&s.Threads, DefaultSentinelThreads)
	meta.Fill(&s.Memory, defaultSentinelMemory)
	meta.Fill(&s.CPU, defaultSentinelCPU)
}

// Validate reports what is wrong with the carriers' own settings, with their full keys. What
// depends on the node pools (the pool, whether a carrier fits a node) and on the stack (the
// image's pin, hostnames in the namespace, the environment) the stack checks.
func (k CarriersConfig) Validate(p meta.Problems) {
	if k.Count < 1 {
		p.Add(CarriersKey+".count", strconv.Itoa(k.Count), "must be at least 1")
	}
	switch {
	case k.WorkersPerCarrier < 1:
		p.Add(CarriersKey+".workersPerCarrier", strconv.Itoa(k.WorkersPerCarrier), "must be at least 1")
	case k.WorkersPerCarrier > MaxProcesses:
		p.Add(CarriersKey+".workersPerCarrier", strconv.Itoa(k.WorkersPerCarrier),
			fmt.Sprintf("allowed: 1..%d (each process listens on a port of a fixed range the NetworkPolicies open)", MaxProcesses))
	}
}

// Validate reports what is wrong with the sentinels' own settings, with their full keys. That
// towers run for them to sit beside, and the syntax of their quantities, the stack checks.
func (s SentinelsConfig) Validate(p meta.Problems) {
	if s.Threads < 1 {
		p.Add(SentinelsKey+".threads", strconv.Itoa(s.Threads), "must be at least 1")
	}
}
