package stacks

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"kolotoc/components/meta"
)

// Defaults of the clouds' control-plane and storage access. Each says its unit and why.
const (
	// defaultMaintenanceStart, defaultMaintenanceDuration, defaultMaintenanceDays: GKE upgrades
	// the control plane and the nodes on Saturday and Sunday nights, 01:00-07:00 UTC, when the
	// fewest interactive users are on. 2 days × 6 h gives at least 48 h in any 32 days, the
	// least GKE accepts.
	defaultMaintenanceStart    = "01:00"
	defaultMaintenanceDuration = "6h"
	// gcpAutoModeRange: the range GCP's auto-mode networks (the `default` network) take every
	// regional subnet from, so it holds every node address of a cluster on that network (the
	// kubelet mounts the Filestore share from its node's address).
	gcpAutoModeRange = "10.128.0.0/9"
	// minMaintenanceWindow, maxMaintenanceWindow: GKE wants each window at least 4 hours long;
	// a window longer than a day overlaps the next.
	minMaintenanceWindow = 4 * time.Hour
	maxMaintenanceWindow = 24 * time.Hour
	// minMaintenancePer32Days: GKE refuses windows that leave less than 48 hours in any 32 days.
	minMaintenancePer32Days = 48 * time.Hour
)

var (
	defaultMaintenanceDays = []string{"SA", "SU"}
	allowedWeekdays        = []string{"MO", "TU", "WE", "TH", "FR", "SA", "SU"}
)

// applyAccessDefaults fills the maintenance window (gcp) and the Filestore client ranges (gcp's
// default network). Zero values only, like every default.
func (c *Config) applyAccessDefaults() {
	if c.Cloud != CloudGCP {
		return
	}
	w := &c.Cluster.MaintenanceWindow
	meta.Fill(&w.Start, defaultMaintenanceStart)
	meta.Fill(&w.Duration, defaultMaintenanceDuration)
	if len(w.Days) == 0 {
		w.Days = slices.Clone(defaultMaintenanceDays)
	}
}

// validateAccess checks who may reach the API server and the maintenance window.
func (c *Config) validateAccess(v *Validator) {
	k := c.Cluster
	for i, cidr := range k.AuthorizedNetworks {
		v.CIDR(fmt.Sprintf("cluster.authorizedNetworks[%d]", i), cidr,
			"the networks allowed to reach the API server, e.g. your office's 203.0.113.0/24 or the address `pulumi up` runs from")
	}
	if k.PrivateEndpoint && len(k.AuthorizedNetworks) > 0 && (c.Cloud == CloudAWS || c.Cloud == CloudAzure) {
		v.add("cluster.authorizedNetworks", strings.Join(k.AuthorizedNetworks, ","), fmt.Sprintf(
			"with cluster.privateEndpoint true the API server on %s has no public endpoint for these to restrict; "+
				"allowed: an empty list (reach it from the cluster's network), or cluster.privateEndpoint false", c.Cloud))
	}
	if c.Cloud == CloudGCP {
		c.validateMaintenanceWindow(v)
	} else if w := k.MaintenanceWindow; IsCloud(c.Cloud) && (w.Start != "" || w.Duration != "" || len(w.Days) > 0) {
		v.add("cluster.maintenanceWindow", "(set)", "only GKE's upgrades follow a Kolotoc maintenance window; remove it on cloud "+c.Cloud)
	}

}

func (c *Config) validateMaintenanceWindow(v *Validator) {
	w := c.Cluster.MaintenanceWindow
	const key = "cluster.maintenanceWindow"
	if _, err := time.Parse("15:04", w.Start); err != nil {
		v.add(key+".start", w.Start, "not a time of day; allowed: HH:MM in UTC, e.g. 01:00")
	}
	d, err := time.ParseDuration(w.Duration)
	if err != nil || d < minMaintenanceWindow || d > maxMaintenanceWindow || d%time.Minute != 0 {
		v.add(key+".duration", w.Duration, fmt.Sprintf("allowed: whole minutes from %s to %s, e.g. 6h (GKE wants at least 4 hours at a time)",
			fmtDuration(minMaintenanceWindow), fmtDuration(maxMaintenanceWindow)))
		d = 0
	}
	seen := map[string]bool{}
	for i, day := range w.Days {
		if seen[day] {
			v.add(fmt.Sprintf("%s.days[%d]", key, i), day, "named twice; each day once")
		}
		seen[day] = true
		v.oneOf(fmt.Sprintf("%s.days[%d]", key, i), day, allowedWeekdays)
	}
	// Any 32 days hold every weekday at least 4 times.
	if total := 4 * time.Duration(len(seen)) * d; d > 0 && total < minMaintenancePer32Days {
		v.add(key, fmt.Sprintf("%s on %s", w.Duration, strings.Join(w.Days, ",")), fmt.Sprintf(
			"gives GKE %s in some 32 days, it needs at least %s; allowed: more days or longer windows, e.g. 6h on SA,SU",
			fmtDuration(total), fmtDuration(minMaintenancePer32Days)))
	}
}

// CIDR checks a CIDR that opens something to a network (the API server, the Jupyter
// LoadBalancer, a Filestore export): a network address, and one rule for how broad it may be,
// minSourcePrefix. A list of CIDRs is checked entry by entry, so that rule is what keeps a list
// from adding up to the internet (0.0.0.0/1 and 128.0.0.0/1 are each refused).
func (v *Validator) CIDR(key, value, what string) {
	ip, n, err := net.ParseCIDR(value)
	if err != nil {
		v.add(key, value, "not a CIDR; allowed: "+what)
		return
	}
	ones, bits := n.Mask.Size()
	switch min := minSourcePrefix[bits]; {
	case ones == 0:
		v.add(key, value, fmt.Sprintf("opens it to the whole internet; allowed: /%d or narrower for IPv%d, %s", min, ipVersion[bits], what))
	case ones < min:
		v.add(key, value, fmt.Sprintf("too broad: allowed: /%d or narrower for IPv%d, %s", min, ipVersion[bits], what))
	case !ip.Equal(n.IP):
		v.add(key, value, fmt.Sprintf("not a network address (host bits set); allowed: %s", n))
	}
}

// minSourcePrefix is the broadest CIDR that may open anything, by address length: a /8 of IPv4,
// a /16 of IPv6. 0.0.0.0/0 and its halves are the internet.
var minSourcePrefix = map[int]int{32: 8, 128: 16}

// ipVersion names an address length's IP version.
var ipVersion = map[int]int{32: 4, 128: 6}

// fmtDuration writes a duration the way users write it: 6h, 4h30m.
func fmtDuration(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
