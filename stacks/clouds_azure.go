package stacks

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	"kolotoc/components/cloud/aks"
)

// Azure Files protocols for `kolotoc:storage.protocol` with storage.type azurefiles.
const (
	// AzureFilesNFS: an NFS 4.1 share on a Premium account that takes no key and answers the
	// cluster's subnet only.
	AzureFilesNFS = "nfs"
	// AzureFilesSMB: an SMB share the CSI driver mounts with the account key.
	AzureFilesSMB = "smb"
)

var (
	allowedAzureFilesProtocols = []string{AzureFilesNFS, AzureFilesSMB}

	// azureSubnetID is an ARM subnet resource ID; its first group is the subscription.
	// privateFilesZoneID is an existing private DNS zone of the file service (storage.privateDnsZoneId).
	privateFilesZoneID = regexp.MustCompile(`(?i)^/subscriptions/[0-9a-f-]{36}/resourceGroups/[^/]+/providers/Microsoft\.Network/privateDnsZones/privatelink\.file\.core\.windows\.net$`)
	azureSubnetID      = regexp.MustCompile(`(?i)^/subscriptions/([0-9a-f-]{36})/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+$`)

	// aksReservedRanges: AKS refuses these for the service, pod and virtual network ranges
	// (link-local, and ranges Azure keeps for itself).
	aksReservedRanges = []string{"169.254.0.0/16", "172.30.0.0/16", "172.31.0.0/16", "192.0.2.0/24"}
)

// AzureSubscription is the subscription of cluster.subnetId, or "" when it has none.
func (k Cluster) AzureSubscription() string {
	if m := azureSubnetID.FindStringSubmatch(k.SubnetID); m != nil {
		return m[1]
	}
	return ""
}

// AKSDNSServiceIP is the cluster DNS Service's address in cluster.serviceCidr: its tenth
// address, as AKS chooses it in the default range (10.0.0.10); "" without a serviceCidr.
func (k Cluster) AKSDNSServiceIP() string {
	_, n, err := net.ParseCIDR(k.ServiceCIDR)
	if err != nil || n.IP.To4() == nil {
		return ""
	}
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+10).String()
}

// validateAzureNetwork checks the subnet the cluster brings, its Kubernetes ranges and the
// Azure Files protocol. Like the other cloud keys, they are accepted on the simulated cloud, so
// that a copy of an azure stack runs there unchanged.
func (c *Config) validateAzureNetwork(v *Validator) {
	k := c.Cluster
	if (IsCloud(c.Cloud) && c.Cloud != CloudAzure) || c.Cloud == CloudExisting {
		for key, val := range map[string]string{"cluster.subnetId": k.SubnetID, "cluster.serviceCidr": k.ServiceCIDR, "cluster.podCidr": k.PodCIDR,
			"cluster.adminPrincipalType": k.AdminPrincipalType} {
			if val != "" {
				hint := ""
				if key == "cluster.subnetId" && c.Cloud == CloudAWS {
					hint = " (on aws: cluster.vpcId and cluster.subnetIds)"
				}
				v.add(key, val, "only for cloud azure"+hint+"; remove it on cloud "+c.Cloud)
			}
		}
	}
	if c.Cloud == CloudAzure {
		const onAzure = "only for cloud aws; on azure name the one subnet every pool runs in as cluster.subnetId"
		if k.VPCID != "" {
			v.add("cluster.vpcId", k.VPCID, onAzure)
		}
		if len(k.SubnetIDs) > 0 {
			v.add("cluster.subnetIds", strings.Join(k.SubnetIDs, ","), onAzure)
		}
	}
	if t := k.AdminPrincipalType; t != "" && !slices.Contains(aks.AdminPrincipalTypes, t) {
		v.add("cluster.adminPrincipalType", t, "allowed: "+strings.Join(aks.AdminPrincipalTypes, ", "))
	}
	if k.SubnetID != "" && !azureSubnetID.MatchString(k.SubnetID) {
		v.add("cluster.subnetId", k.SubnetID, "not an Azure subnet resource ID; allowed: "+
			"/subscriptions/<subscription id>/resourceGroups/<group>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet> "+
			"(az network vnet subnet show --query id)")
	}
	ranges := map[string]*net.IPNet{}
	for _, r := range []struct{ key, val string }{{"cluster.serviceCidr", k.ServiceCIDR}, {"cluster.podCidr", k.PodCIDR}} {
		if r.val == "" {
			continue
		}
		_, n, err := net.ParseCIDR(r.val)
		ones, bits := 0, 0
		if err == nil {
			ones, bits = n.Mask.Size()
		}
		if err != nil || bits != 32 || n.String() != r.val || ones < 8 || ones > 24 {
			v.add(r.key, r.val, "allowed: an IPv4 network address from /8 to /24 outside the subnet's virtual network, e.g. 10.200.0.0/16")
			continue
		}
		if reserved := overlapsAny(n, aksReservedRanges); reserved != "" {
			v.add(r.key, r.val, fmt.Sprintf("overlaps %s, which AKS refuses; allowed: a range outside %s", reserved, strings.Join(aksReservedRanges, ", ")))
			continue
		}
		ranges[r.key] = n
	}
	if svc, pod := ranges["cluster.serviceCidr"], ranges["cluster.podCidr"]; svc != nil && pod != nil && (svc.Contains(pod.IP) || pod.Contains(svc.IP)) {
		v.add("cluster.podCidr", k.PodCIDR, "overlaps cluster.serviceCidr "+k.ServiceCIDR+"; allowed: a range apart from it")
	}

}

// overlapsAny is the first of ranges that n overlaps, or "".
func overlapsAny(n *net.IPNet, ranges []string) string {
	for _, r := range ranges {
		_, o, _ := net.ParseCIDR(r)
		if o.Contains(n.IP) || n.Contains(o.IP) {
			return r
		}
	}
	return ""
}
