// Package azure is the entry of cloud azure (kolotoc:cloud: azure): a resource group with an AKS
// cluster, its agent pools and an Azure Files share, made by components/cloud/aks. It registers
// itself with the stack (stacks.RegisterCloud); importing kolotoc/stacks/clouds registers it.
package azure

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/aks"
	"kolotoc/components/cluster"
	"kolotoc/components/meta"
	"kolotoc/stacks"
)

func init() { stacks.RegisterCloud(entry) }

var entry = &stacks.Cloud{
	Name:    stacks.CloudAzure,
	Creates: true,

	Catalogue: catalogue(),
	SpotLabel: "kubernetes.azure.com/scalesetpriority",
	// Scheduled Events: a Preempt event (Spot eviction) is scheduled at least 30 s ahead.
	SpotNotice: &meta.SpotNotice{Seconds: 30, What: "Azure Spot eviction's Scheduled Events notice (Preempt)",
		Doc: "https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events#event-scheduling"},
	Fabric: poolFabric,
	// The zones the local cluster's Karpenter offers Azure's VM sizes in (stacks' autoscale.go).
	KarpenterZones: []string{"1", "2", "3"},

	// The cluster's network is Azure CNI powered by Cilium (components/cloud/aks: NetworkDataplane).
	CiliumDataplane: "Azure CNI powered by Cilium",

	DevicePlugins:    []string{stacks.DevicePluginKolotoc},
	DevicePluginsWhy: "AKS's GPU nodes run no device plugin and Kolotoc creates the cluster, so no GPU Operator is there before it",

	Store:    store,
	Defaults: applyDefaults,
	Check:    check,
	Deploy:   deploy,
}

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultSystemVMSize, defaultSystemNodes: the AKS system pool runs only system pods
	// (CoreDNS, metrics-server, CSI drivers); 4 vCPU, 16 GiB is the smallest size AKS recommends
	// for it.
	DefaultSystemVMSize = "Standard_D4s_v5"
	defaultSystemNodes  = 1
	// Limits on names that derive from cluster.name or the pools' (characters).
	aksDNSPrefixMax = 54 // AKS dnsPrefix, which is cluster.name
	aksPoolNameMax  = 12 // AKS Linux agent pool names: lower-case letters and digits
	// AKSSystemPool is the name of the AKS system pool; no configured pool may take it.
	AKSSystemPool = "system"
)

var (
	allowedAzureZones = []string{"1", "2", "3"}
	aksPoolName       = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)

	// azureSubnetID is an ARM subnet resource ID; its first group is the subscription.
	azureSubnetID = regexp.MustCompile(`(?i)^/subscriptions/([0-9a-f-]{36})/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+$`)
	// acrID is the ARM ID of an Azure Container Registry; its first group is the subscription.
	acrID = regexp.MustCompile(`(?i)^/subscriptions/([0-9a-f-]{36})/resourceGroups/[^/]+/providers/Microsoft\.ContainerRegistry/registries/[a-z0-9]{5,50}$`)

	// aksReservedRanges: AKS refuses these for the service, pod and virtual network ranges
	// (link-local, and ranges Azure keeps for itself).
	aksReservedRanges = []string{"169.254.0.0/16", "172.30.0.0/16", "172.31.0.0/16", "192.0.2.0/24"}
)

// applyDefaults fills the AKS system pool. Zero values only.
func applyDefaults(c *stacks.Config) {
	k := &c.Cluster
	meta.Fill(&k.SystemVMSize, DefaultSystemVMSize)
	meta.Fill(&k.SystemNodes, defaultSystemNodes)
}

// check checks azure's keys: on an azure stack the names AKS derives from cluster.name and the
// pools', the system pool, zones, Spot, the network and who reaches the API server; elsewhere
// (but on the simulated cloud, so that a copy of an azure stack runs there unchanged) that the
// keys only AKS reads are absent.
func check(c *stacks.Config, v *stacks.Validator) {
	k := c.Cluster
	checkNetwork(c, v)
	checkACR(c, v)
	if c.Cloud != stacks.CloudAzure {
		return
	}
	if len(k.Name) > aksDNSPrefixMax {
		v.Add("cluster.name", k.Name, fmt.Sprintf("at most %d characters on azure: it is the AKS DNS prefix", aksDNSPrefixMax))
	}
	if k.SystemNodes < 1 {
		v.Add("cluster.systemNodes", strconv.Itoa(k.SystemNodes), "must be at least 1 (AKS needs a system pool)")
	}
	if _, ok := stacks.LookupMachineType(stacks.CloudAzure, k.SystemVMSize); !ok {
		v.Add("cluster.systemVmSize", k.SystemVMSize, "not an Azure VM size Kolotoc knows; allowed: "+stacks.MachineTypeHint(stacks.CloudAzure, "Standard_D"))
	}
	for i, p := range c.NodePools {
		key := fmt.Sprintf("nodePools[%d]", i)
		for j, z := range p.Zones {
			v.OneOf(fmt.Sprintf("%s.zones[%d]", key, j), z, allowedAzureZones)
		}
		if !aksPoolName.MatchString(p.Name) || p.Name == AKSSystemPool {
			v.Add(key+".name", p.Name, fmt.Sprintf("AKS pool names are 1-%d lower-case letters and digits starting with a letter, and not %q; e.g. gpu, cpu, a100",
				aksPoolNameMax, AKSSystemPool))
		}
		if p.CloudName != "" && (!aksPoolName.MatchString(p.CloudName) || p.CloudName == AKSSystemPool) {
			v.Add(key+".cloudName", p.CloudName, fmt.Sprintf("not an AKS agent pool name; allowed: 1-%d lower-case letters and digits starting with a letter, not %q",
				aksPoolNameMax, AKSSystemPool))
		}
	}
	checkSpot(c, v)
	stacks.CheckPrivateEndpoint(c, v)
}

// checkSpot refuses Spot for the pools Kolotoc's workloads run on: AKS taints every Spot node
// kubernetes.azure.com/scalesetpriority=spot:NoSchedule, and the workloads tolerate only the GPU
// taint, so their pods would stay Pending. Every enabled workload's pools count; Spot pools for
// other jobs are fine.
func checkSpot(c *stacks.Config, v *stacks.Validator) {
	users := c.WorkloadPools()
	for i, p := range c.NodePools {
		if p.Spot && len(users[p.Name]) > 0 {
			v.Add(fmt.Sprintf("nodePools[%d].spot", i), "true", fmt.Sprintf(
				"AKS taints Spot nodes kubernetes.azure.com/scalesetpriority=spot:NoSchedule and %s do not tolerate it; allowed: false (keep Spot for pools no Kolotoc workload uses)",
				strings.Join(users[p.Name], " and ")))
		}
	}
}

// checkNetwork checks the subnet the cluster brings and its Kubernetes ranges. Like the other
// cloud keys, they are accepted on the simulated cloud, so that a copy of an azure stack runs
// there unchanged.
func checkNetwork(c *stacks.Config, v *stacks.Validator) {
	k := c.Cluster
	if on := c.CloudEntry(); (on.Creates && c.Cloud != stacks.CloudAzure) || on.Given() {
		for key, val := range map[string]string{"cluster.subnetId": k.SubnetID, "cluster.serviceCidr": k.ServiceCIDR, "cluster.podCidr": k.PodCIDR,
			"cluster.adminPrincipalType": k.AdminPrincipalType} {
			if val != "" {
				hint := ""
				if key == "cluster.subnetId" && c.Cloud == stacks.CloudAWS {
					hint = " (on aws: cluster.vpcId and cluster.subnetIds)"
				}
				v.Add(key, val, "only for cloud azure"+hint+"; remove it on cloud "+c.Cloud)
			}
		}
	}
	if c.Cloud == stacks.CloudAzure {
		const onAzure = "only for cloud aws; on azure name the one subnet every pool runs in as cluster.subnetId"
		if k.VPCID != "" {
			v.Add("cluster.vpcId", k.VPCID, onAzure)
		}
		if len(k.SubnetIDs) > 0 {
			v.Add("cluster.subnetIds", strings.Join(k.SubnetIDs, ","), onAzure)
		}
	}
	if t := k.AdminPrincipalType; t != "" && !slices.Contains(aks.AdminPrincipalTypes, t) {
		v.Add("cluster.adminPrincipalType", t, "allowed: "+strings.Join(aks.AdminPrincipalTypes, ", "))
	}
	if k.SubnetID != "" && !azureSubnetID.MatchString(k.SubnetID) {
		v.Add("cluster.subnetId", k.SubnetID, "not an Azure subnet resource ID; allowed: "+
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
			v.Add(r.key, r.val, "allowed: an IPv4 network address from /8 to /24 outside the subnet's virtual network, e.g. 10.200.0.0/16")
			continue
		}
		if reserved := overlapsAny(n, aksReservedRanges); reserved != "" {
			v.Add(r.key, r.val, fmt.Sprintf("overlaps %s, which AKS refuses; allowed: a range outside %s", reserved, strings.Join(aksReservedRanges, ", ")))
			continue
		}
		ranges[r.key] = n
	}
	if svc, pod := ranges["cluster.serviceCidr"], ranges["cluster.podCidr"]; svc != nil && pod != nil && (svc.Contains(pod.IP) || pod.Contains(svc.IP)) {
		v.Add("cluster.podCidr", k.PodCIDR, "overlaps cluster.serviceCidr "+k.ServiceCIDR+"; allowed: a range apart from it")
	}
}

// checkACR checks the registry the kubelet identity may pull from: AKS's alone (the simulated
// cloud accepts it, to mirror an azure stack).
func checkACR(c *stacks.Config, v *stacks.Validator) {
	k := c.Cluster
	if k.ACRID == "" {
		return
	}
	if c.Cloud != stacks.CloudAzure && !c.CloudEntry().Local {
		v.Add("cluster.acrId", k.ACRID, "only for cloud azure (the AKS kubelet identity gets AcrPull on it); on cloud "+c.Cloud+
			" pull from it with kolotoc:registries (a token or service principal)")
	} else if !acrID.MatchString(k.ACRID) {
		v.Add("cluster.acrId", k.ACRID, "not an Azure Container Registry resource ID; allowed: "+
			"/subscriptions/<subscription id>/resourceGroups/<group>/providers/Microsoft.ContainerRegistry/registries/<name> "+
			"(az acr show -n <name> --query id)")
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

// poolFabric: a compact pool runs in a proximity placement group, in its zone if it names one.
func poolFabric(_ *stacks.Config, _ stacks.NodePool, _ stacks.MachineType, f *stacks.PoolFabric) {
	if f.Compact {
		f.PlacementGroup = true
	}
}

func deploy(ctx *pulumi.Context, c *stacks.Config) (pulumi.StringOutput, []pulumi.Resource, *stacks.CloudResult, error) {
	k := c.Cluster
	prov, err := aks.NewProvider(ctx, "azure-native", k.Region)
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	onAzure := pulumi.Provider(prov)
	track := &meta.Tracker{} // what the workloads wait for: every resource of the cluster and the store
	pools := make([]aks.Pool, len(c.NodePools))
	for i, p := range c.NodePools {
		pools[i] = aks.Pool{
			Name: p.Name, VMSize: p.MachineType, Nodes: p.Nodes, MinNodes: p.Min(), MaxNodes: p.MaxNodes,
			Zones: p.Zones, Spot: p.Spot, Labels: c.CloudNodeLabels(p), Taints: cluster.NodeTaints(c.SimulatedPool(p)),
			Compact:   c.PoolFabric(p).PlacementGroup,
			CloudName: p.CloudName, DeleteFirst: p.Replace == stacks.ReplaceDeleteFirst,
		}
	}
	cl, err := aks.NewCluster(ctx, stacks.CloudClusterName, &aks.ClusterArgs{
		Name: k.Name, ResourceGroup: resourceGroup(k), NodeResourceGroup: k.Name + "-nodes", Location: k.Region,
		KubernetesVersion: k.KubernetesVersion, SystemVMSize: k.SystemVMSize, SystemNodes: k.SystemNodes,
		Pools: pools, Tags: stacks.CloudLabels(c),
		SubnetID: k.SubnetID, Subscription: subnetSubscription(k),
		ServiceCIDR: k.ServiceCIDR, DNSServiceIP: dnsServiceIP(k), PodCIDR: k.PodCIDR,
		AuthorizedNetworks: k.AuthorizedNetworks, PrivateEndpoint: k.PrivateEndpoint, Protect: k.Protect,
		ACRID: k.ACRID, ACRSubscription: acrSubscription(k), AdminPrincipalType: k.AdminPrincipalType,
	}, onAzure, track.Option())
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	res := &stacks.CloudResult{Outputs: pulumi.Map{}, Kube: kubeAccess(c)}
	if s := c.Storage; c.CloudStore() && c.ExistingStore() {
		// An existing share: nothing to create, AKS mounts it with its built-in driver (files.go).
		res.Outputs["storageAccount"] = pulumi.String(s.Account)
	} else if c.CloudStore() { // an Azure Files share (files.go)
		nfs := s.Protocol == AzureFilesNFS
		protocol := aks.SMB
		if nfs {
			protocol = aks.NFS
		}
		files, err := aks.NewFiles(ctx, stacks.CloudStoreName, &aks.FilesArgs{
			Account: s.Account, ResourceGroup: cl.ResourceGroup.Name, Location: k.Region, Tier: s.Tier, Protocol: protocol, ShareName: s.ShareName,
			QuotaGiB: stacks.GiB(s.Size), Protect: s.Protect, Tags: stacks.CloudLabels(c), SubnetID: k.SubnetID,
			PrivateEndpoint: s.PrivateEndpoint, PrivateDNSZoneID: s.PrivateDNSZoneID,
			ShareRetentionDays: backupDays(s),
		}, onAzure, track.Option())
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		res.Store = filesVolume(files, cl.ResourceGroup.Name, nfs)
		res.Outputs["storageAccount"] = files.Account
	}
	return cl.Kubeconfig, track.Resources(), res, nil
}

// kubeAccess: the az CLI fetches the credentials into the user's kubeconfig under the context
// cluster.context, or cluster.name.
func kubeAccess(c *stacks.Config) stacks.KubeAccess {
	k := c.Cluster
	alias := k.Context
	meta.Fill(&alias, k.Name)
	return stacks.KubeAccess{
		Context: pulumi.String(alias).ToStringOutput(),
		KubeconfigCommand: pulumi.String(fmt.Sprintf("az aks get-credentials --resource-group %s --name %s --context %s",
			resourceGroup(k), k.Name, stacks.ShellQuote(alias))).ToStringOutput(),
	}
}

// resourceGroup is the resource group Kolotoc creates for an AKS cluster.
func resourceGroup(k stacks.Cluster) string { return k.Name + "-rg" }

// subnetSubscription is the subscription of cluster.subnetId, or "" when it has none.
func subnetSubscription(k stacks.Cluster) string {
	if m := azureSubnetID.FindStringSubmatch(k.SubnetID); m != nil {
		return m[1]
	}
	return ""
}

// acrSubscription is the subscription of cluster.acrId, or "" when it has none.
func acrSubscription(k stacks.Cluster) string {
	if m := acrID.FindStringSubmatch(k.ACRID); m != nil {
		return m[1]
	}
	return ""
}

// dnsServiceIP is the cluster DNS Service's address in cluster.serviceCidr: its tenth address,
// as AKS chooses it in the default range (10.0.0.10); "" without a serviceCidr.
func dnsServiceIP(k stacks.Cluster) string {
	_, n, err := net.ParseCIDR(k.ServiceCIDR)
	if err != nil || n.IP.To4() == nil {
		return ""
	}
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+10).String()
}
