package stacks

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/aks"
	"kolotoc/components/storage"
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

// applyAzureDefaults chooses the Azure Files protocol: NFS, which needs no key and no public
// network, wherever it can run (a subnet of the user's own, for the storage firewall to name);
// SMB otherwise, as before the key existed. Zero values only.
func (c *Config) applyAzureDefaults() {
	s := &c.Storage
	if s.Type != storage.TypeAzureFiles || s.Protocol != "" || s.Share != "" { // an existing share's protocol is named (storage_existing.go)
		return
	}
	s.Protocol = AzureFilesSMB
	if c.Cluster.SubnetID != "" {
		s.Protocol = AzureFilesNFS
	}
}

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
func (c *Config) validateAzureNetwork(v *validator) {
	k, s := c.Cluster, c.Storage
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

	if s.PrivateDNSZoneID != "" && !s.PrivateEndpoint {
		v.add("storage.privateDnsZoneId", s.PrivateDNSZoneID, "only with storage.privateEndpoint: true")
	}
	if s.Type != storage.TypeAzureFiles || s.Share != "" {
		if s.PrivateEndpoint {
			v.add("storage.privateEndpoint", "true", "only for a share the stack creates (storage.type azurefiles without storage.share)")
		}
	}
	if s.Type != storage.TypeAzureFiles {
		if s.Protocol != "" {
			v.add("storage.protocol", s.Protocol, "only for storage.type azurefiles")
		}
		return
	}
	if s.Share != "" {
		return // an existing share: its protocol is checked with it (storage_existing.go)
	}
	if s.PrivateEndpoint && s.Protocol != AzureFilesNFS {
		v.add("storage.privateEndpoint", "true", "a private endpoint serves the NFS share (storage.protocol nfs, with cluster.subnetId); allowed with smb: false")
	}
	if z := s.PrivateDNSZoneID; z != "" && !privateFilesZoneID.MatchString(z) {
		v.add("storage.privateDnsZoneId", z, "allowed: the resource ID of a "+aks.FilesPrivateZone+" zone, "+
			"/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/privateDnsZones/"+aks.FilesPrivateZone)
	}
	v.oneOf("storage.protocol", s.Protocol, allowedAzureFilesProtocols)
	if s.Protocol != AzureFilesNFS {
		return
	}
	if k.SubnetID == "" {
		v.add("storage.protocol", s.Protocol, "an NFS share answers only a virtual network rule, and needs cluster.subnetId: "+
			"the subnet the cluster runs in, with the Microsoft.Storage service endpoint; allowed without it: smb (mounted with the account key)")
	}
	if s.Tier != AzureFilesPremium {
		v.add("storage.tier", s.Tier, "Azure Files serves NFS from Premium (FileStorage) accounts only; allowed with storage.protocol nfs: Premium "+
			"(or storage.protocol smb)")
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

// azureFilesVolume points the shared volume at the Azure Files share, through the Azure Files
// CSI driver. An NFS share needs nothing secret: it answers the cluster's subnet and asks for no
// key. An SMB share is mounted with the account key, which goes into a Kubernetes Secret.
func azureFilesVolume(files *aks.Files, resourceGroup pulumi.StringOutput, nfs bool) func(*storage.Args) {
	return func(a *storage.Args) {
		a.InCluster = false
		// With a private endpoint, the volume waits for the share's private DNS records, so that
		// no node mounts it through a name that still points at the closed public endpoint.
		a.VolumeDeps = files.Ready
		if nfs {
			a.MountOptions = aks.NFSMountOptions
			a.CSI = &storage.CSI{
				Driver: storage.AzureFilesDriver,
				// The driver's form for a share it did not provision, <account>_<share> ('#' is
				// its own); the attributes say where the share is.
				VolumeHandle: pulumi.Sprintf("%s_%s", files.Account, files.ShareName),
				Attributes: pulumi.StringMap{
					"resourceGroup":  resourceGroup,
					"storageAccount": files.Account,
					"shareName":      files.ShareName,
					"protocol":       pulumi.String("nfs"),
				},
			}
			return
		}
		a.MountOptions = aks.MountOptions
		a.CSI = &storage.CSI{
			Driver:       storage.AzureFilesDriver,
			VolumeHandle: pulumi.Sprintf("%s#%s#%s", resourceGroup, files.Account, files.ShareName),
			Attributes:   pulumi.StringMap{"shareName": files.ShareName},
			SecretData: pulumi.ToSecret(pulumi.StringMap{
				"azurestorageaccountname": files.Account,
				"azurestorageaccountkey":  files.Key,
			}).(pulumi.StringMapOutput),
		}
	}
}
