package stacks

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// validateAccess checks who may reach the API server; each cloud's entry checks the rest of it
// (CheckPrivateEndpoint, gcp's maintenance window).
func (c *Config) validateAccess(v *Validator) {
	for i, cidr := range c.Cluster.AuthorizedNetworks {
		v.CIDR(fmt.Sprintf("cluster.authorizedNetworks[%d]", i), cidr,
			"the networks allowed to reach the API server, e.g. your office's 203.0.113.0/24 or the address `pulumi up` runs from")
	}
}

// CheckPrivateEndpoint refuses authorized networks beside a private endpoint, on a cloud whose
// private API server has no public endpoint left for them to restrict (aws, azure).
func CheckPrivateEndpoint(c *Config, v *Validator) {
	k := c.Cluster
	if k.PrivateEndpoint && len(k.AuthorizedNetworks) > 0 {
		v.add("cluster.authorizedNetworks", strings.Join(k.AuthorizedNetworks, ","), fmt.Sprintf(
			"with cluster.privateEndpoint true the API server on %s has no public endpoint for these to restrict; "+
				"allowed: an empty list (reach it from the cluster's network), or cluster.privateEndpoint false", c.Cloud))
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

// FormatDuration is fmtDuration, for the entries' messages.
func FormatDuration(d time.Duration) string { return fmtDuration(d) }

// fmtDuration writes a duration the way users write it: 6h, 4h30m.
func fmtDuration(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
