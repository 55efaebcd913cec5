package gcp

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/meta"
	"kolotoc/components/storage"
	"kolotoc/stacks"
)

// Filestore tiers for `kolotoc:storage.tier` with storage.type filestore.
const (
	FilestoreBasicHDD = "BASIC_HDD"
	FilestoreBasicSSD = "BASIC_SSD"
	FilestoreZonal    = "ZONAL"
	FilestoreRegional = "REGIONAL"
)

const (
	// defaultFilestoreTier: ZONAL is the tier Google positions for ML training (high throughput,
	// NFSv3, 1 TiB minimum); BASIC_HDD is too slow for checkpoints of large models.
	defaultFilestoreTier = FilestoreZonal
	// gcpAutoModeRange: the range GCP's auto-mode networks (the `default` network) take every
	// regional subnet from, so it holds every node address of a cluster on that network (the
	// kubelet mounts the Filestore share from its node's address).
	gcpAutoModeRange = "10.128.0.0/9"
)

var (
	allowedFilestoreTiers = []string{FilestoreBasicHDD, FilestoreBasicSSD, FilestoreZonal, FilestoreRegional}
	// filestoreMinGiB, filestoreMaxGiB: capacity range of each Filestore tier (GiB), from
	// Google's service-tier tables.
	filestoreMinGiB = map[string]int64{FilestoreBasicHDD: 1024, FilestoreBasicSSD: 2560, FilestoreZonal: 1024, FilestoreRegional: 1024}
	filestoreMaxGiB = map[string]int64{FilestoreBasicHDD: 65434, FilestoreBasicSSD: 65434, FilestoreZonal: 102400, FilestoreRegional: 102400}
)

// store is Filestore (storage.type filestore): an NFS instance the gcp cloud creates, which a
// simulated stack stands in for with its in-cluster server.
var store = &stacks.Store{
	Type:     storage.TypeFilestore,
	Defaults: storeDefaults,
	Check:    checkStore,
	Identity: func(c *stacks.Config, id map[string]string) {
		// Filestore cannot move, change tier or change network in place.
		s := c.Storage
		id["cluster.region"], id["cluster.project"], id["cluster.network"] = c.Cluster.Region, c.Cluster.Project, c.Cluster.Network
		id["storage.tier"], id["storage.zone"] = s.Tier, s.Zone
	},
	NoBackup: "Kolotoc cannot schedule Filestore backups: pulumi-gcp v7 declares one-off backups only, " +
		"and a backup taken at each `pulumi up` is not a schedule (docs/recovery.md says how to schedule them); allowed with storage.type filestore: false",
}

// storeDefaults fills the tier, the size (the tier's least), the zone of a zonal tier (the
// cluster's, or the towers' pool's first) and, on GCP's default (auto mode) network, whose nodes'
// range is known, the client ranges. Zero values only.
func storeDefaults(c *stacks.Config) {
	s := &c.Storage
	meta.Fill(&s.Tier, defaultFilestoreTier)
	if s.Size == "" {
		if min, ok := filestoreMinGiB[s.Tier]; ok {
			s.Size = fmt.Sprintf("%dGi", min)
		}
	}
	if s.Zone == "" && s.Tier != FilestoreRegional {
		s.Zone = c.Cluster.Zone
		if s.Zone == "" {
			if p := c.TowersPool(); p != nil && len(p.Zones) > 0 {
				s.Zone = p.Zones[0]
			}
		}
	}
	if c.Cloud == stacks.CloudGCP && len(s.ClientRanges) == 0 && c.Cluster.Network == defaultGCPNetwork {
		s.ClientRanges = []string{gcpAutoModeRange}
	}
}

// checkStore checks Filestore's tier, size, zone and client ranges; the client ranges are
// Filestore's alone.
func checkStore(c *stacks.Config, v *stacks.Validator) {
	k, s := c.Cluster, c.Storage
	if s.Type != storage.TypeFilestore {
		if len(s.ClientRanges) > 0 {
			v.Add("storage.clientRanges", strings.Join(s.ClientRanges, ","), "only for storage.type filestore")
		}
		return
	}
	v.OneOf("storage.tier", s.Tier, allowedFilestoreTiers)
	if size, err := resource.ParseQuantity(s.Size); err == nil {
		gib := (size.Value() + (1<<30 - 1)) >> 30 // rounded up
		if min, ok := filestoreMinGiB[s.Tier]; ok && (gib < min || gib > filestoreMaxGiB[s.Tier]) {
			v.Add("storage.size", s.Size, fmt.Sprintf("Filestore tier %s holds %dGi to %dGi; allowed: %dGi..%dGi (or leave storage.size unset for %dGi)",
				s.Tier, min, filestoreMaxGiB[s.Tier], min, filestoreMaxGiB[s.Tier], min))
		}
	}
	if s.Tier != FilestoreRegional && c.Cloud == stacks.CloudGCP {
		if s.Zone == "" {
			v.Add("storage.zone", "(unset)", "required for a zonal Filestore tier with a regional cluster and no zones on the towers' pool; e.g. "+k.Region+"-a")
		} else if k.Region != "" && !strings.HasPrefix(s.Zone, k.Region+"-") {
			v.Add("storage.zone", s.Zone, fmt.Sprintf("not a zone of region %s; allowed: %s-a, %s-b, …", k.Region, k.Region, k.Region))
		}
	}
	if c.Cloud == stacks.CloudGCP && len(s.ClientRanges) == 0 {
		v.Add("storage.clientRanges", "[]", fmt.Sprintf("required with cluster.network %s: the ranges of the cluster's nodes (its subnet's primary range), "+
			"which alone may mount the Filestore share; e.g. [10.10.0.0/20]", k.Network))
	}
	for i, cidr := range s.ClientRanges {
		v.CIDR(fmt.Sprintf("storage.clientRanges[%d]", i), cidr, "the ranges of the cluster's nodes, e.g. 10.128.0.0/9 on the default network")
	}
}
