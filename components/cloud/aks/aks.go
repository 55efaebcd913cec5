// Package aks makes a stack's cluster on Azure: a resource group, an AKS cluster with a small
// system pool, one agent pool per configured pool (GPU VM size, autoscaling, Spot, the GPU taint,
// the Kolotoc pool label), Microsoft Entra ID sign-in with Azure RBAC and no local accounts, the
// runner's RBAC Cluster Admin role on the cluster, a kubeconfig whose user runs kubelogin (no
// credential in it), and a storage account with a file share for the shared storage. AKS creates
// its own virtual network, or the pools join a subnet the user brings (by its resource ID), so the
// azure-native network module (5.6 GB to compile) is never imported. It is the only package
// that imports the Azure SDK, so that only the stack layer pays for compiling it.
package aks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-azure-native-sdk/authorization/v2"
	"github.com/pulumi/pulumi-azure-native-sdk/compute/v2"
	"github.com/pulumi/pulumi-azure-native-sdk/containerservice/v2"
	"github.com/pulumi/pulumi-azure-native-sdk/resources/v2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/kubeaccess"
	"kolotoc/components/meta"
)

const (
	// SpotEvictionPolicy: an evicted Spot node is deleted, not deallocated; a deallocated node
	// keeps its disk (billed) and its cores count against the quota while it earns nothing.
	SpotEvictionPolicy = "Delete"
	// spotMaxPrice -1: pay up to the on-demand price, so nodes are evicted for capacity only,
	// never because the Spot price moved.
	spotMaxPrice = -1
	// SpotTaint is the taint AKS puts on every Spot node whether asked or not; it is declared
	// so that the pool's registered taints say what its nodes carry.
	SpotTaint = "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"
	// osDiskGiB: OS disk per node (GiB); training images are 10-20 GB each.
	osDiskGiB = 128
	// The pod network: Azure CNI in overlay mode with the Cilium dataplane, which enforces
	// NetworkPolicy (AKS's default, kubenet, enforces none). Pod addresses come from an overlay
	// range, so the GPU pools' many pods do not use up the virtual network's addresses.
	NetworkPlugin     = "azure"
	NetworkPluginMode = "overlay"
	NetworkDataplane  = "cilium"
	NetworkPolicy     = "cilium"
	// NetworkContributorRole is the built-in role AKS's own CLI grants the cluster's identity on
	// a subnet it brings: AKS joins the node scale sets' interfaces to it (creation, autoscaling)
	// and reads it. Granted on that subnet alone.
	NetworkContributorRole = "4d97b98b-1d4f-4787-a291-c67834d212e7"
	// AcrPullRole is the built-in role that pulls images from a container registry and nothing
	// else; `az aks update --attach-acr` grants it to the cluster's kubelet identity.
	AcrPullRole = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
	// KubeletIdentity is the key of the nodes' managed identity in the cluster's identityProfile:
	// the identity the kubelets pull images as.
	KubeletIdentity = "kubeletidentity"
	// RBACClusterAdminRole is the built-in role "Azure Kubernetes Service RBAC Cluster Admin":
	// with Azure RBAC for Kubernetes authorization, what cluster-admin is. Granted to whoever runs
	// `pulumi up`, on the cluster alone, so that the Kubernetes provider can reach it once local
	// accounts are off (AKS, "Use Azure role-based access control for Kubernetes Authorization",
	// https://learn.microsoft.com/en-us/azure/aks/manage-azure-rbac).
	RBACClusterAdminRole = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
	// AADServerID is the application ID of the Azure Kubernetes Service AAD Server, the audience
	// of the tokens an AKS-managed Entra ID cluster accepts: the same in every tenant (AKS, "Use
	// kubelogin to authenticate users in Azure Kubernetes Service",
	// https://learn.microsoft.com/en-us/azure/aks/kubelogin-authentication).
	AADServerID = "6dae42f8-4368-4678-94ff-3960e28e3630"
	// AuthPlugin is the exec credential plugin of the kubeconfig: Azure's kubelogin.
	AuthPlugin = "kubelogin"
)

// AgentPoolTimeouts: an agent pool of ND96asr_v4 VMs has taken over 30 minutes to provision when
// capacity is scarce; the default would fail a healthy `pulumi up`.
var AgentPoolTimeouts = &pulumi.CustomTimeouts{Create: "90m", Update: "90m", Delete: "45m"}

// Taint is a node taint (one type on every cloud).
type Taint = kubeaccess.Taint

// Pool is one AKS agent pool.
type Pool struct {
	Name string // the pool's Kolotoc name: its agent pool's name starts with it (PoolName)
	// CloudName pins the agent pool's name (1-12 lower-case letters and digits); empty = PoolName
	// generates one that changes with every setting AKS cannot change in place, so a replacement
	// can create first.
	CloudName string
	// DeleteFirst: a replacement deletes the old pool before creating the new one (quota for one
	// pool only, and no GPUs between the two); otherwise the new pool is up before the old goes.
	// Required with CloudName: one name cannot exist twice.
	DeleteFirst bool
	VMSize      string            // e.g. Standard_ND96asr_v4
	Nodes       int               // initial node count
	MinNodes    int               // autoscaling lower bound; autoscaling is on when MinNodes < MaxNodes
	MaxNodes    int               // autoscaling upper bound
	Zones       []string          // availability zones "1".."3"; empty = none
	Spot        bool              // Spot priority
	Labels      map[string]string // every Kubernetes label of the nodes
	Taints      []Taint           // every taint of the nodes, the GPU taint included (Spot pools get SpotTaint as well)
	// Compact: the pool's VMs in a proximity placement group of its own, <cluster>-<pool>, in the
	// cluster's resource group (AKS, "Use proximity placement groups to reduce latency for your
	// AKS cluster": a group maps to one availability zone, and a pool joins one only when it is
	// created).
	Compact bool
}

// ProximityPlacementType is the type of the compact pools' proximity placement groups.
const ProximityPlacementType = "Standard"

// ClusterArgs are the inputs of an AKS cluster.
type ClusterArgs struct {
	Name              string            // cluster name and DNS prefix (at most 54 characters)
	ResourceGroup     string            // resource group created for the stack
	NodeResourceGroup string            // resource group AKS puts the nodes in
	Location          string            // Azure region
	KubernetesVersion string            // empty = AKS's default
	SystemVMSize      string            // VM size of the system pool
	SystemNodes       int               // nodes of the system pool
	Pools             []Pool            // user pools
	Tags              map[string]string // Azure tags

	// SubnetID is the ARM ID of an existing subnet every pool joins; empty = AKS creates a
	// virtual network in the node resource group. Subscription is that subnet's subscription.
	SubnetID     string
	Subscription string
	ServiceCIDR  string // Kubernetes Services' range; empty = AKS's 10.0.0.0/16
	DNSServiceIP string // cluster DNS address in ServiceCIDR; set with it
	PodCIDR      string // the overlay's pod range; empty = AKS's 10.244.0.0/16

	AuthorizedNetworks []string // CIDRs allowed to reach the API server; empty = any
	PrivateEndpoint    bool     // a private cluster: the API server has an address in the cluster's network only
	Protect            bool     // refuse `pulumi destroy` of the cluster (Pulumi protect)

	// ACRID is the ARM ID of a container registry the nodes pull from (AcrPull for the kubelet
	// identity); ACRSubscription is its subscription. Empty = none.
	ACRID           string
	ACRSubscription string

	// AdminPrincipalType is the kind of principal running `pulumi up` (one of
	// AdminPrincipalTypes), which gets RBACClusterAdminRole; empty = User.
	AdminPrincipalType string
}

// AdminPrincipalTypes are the kinds of principal that can run `pulumi up`: a person signed in
// with `az login`, or a service principal or managed identity (CI). A role assignment naming the
// wrong kind is refused by Azure.
var AdminPrincipalTypes = []string{"User", "ServicePrincipal"}

// Cluster is the resource group, the AKS cluster and its agent pools.
type Cluster struct {
	pulumi.ResourceState
	ResourceGroup *resources.ResourceGroup
	ClusterName   pulumi.StringOutput
	Kubeconfig    pulumi.StringOutput // secret
	AgentPools    []*containerservice.AgentPool
	// PlacementGroups are the compact pools' proximity placement groups, by pool name.
	PlacementGroups map[string]*compute.ProximityPlacementGroup
	// SubnetAccess is the cluster identity's role on SubnetID; nil without a subnet.
	SubnetAccess *authorization.RoleAssignment
	// RegistryAccess is the kubelet identity's AcrPull on ACRID; nil without a registry.
	RegistryAccess *authorization.RoleAssignment
	// AdminAccess is the runner's RBAC Cluster Admin role on the cluster: with local accounts
	// off, the only way `pulumi up` reaches the Kubernetes API.
	AdminAccess *authorization.RoleAssignment
}

// NewCluster registers the resource group, the cluster and its pools.
func NewCluster(ctx *pulumi.Context, name string, args *ClusterArgs, opts ...pulumi.ResourceOption) (*Cluster, error) {
	if args == nil {
		return nil, errors.New("aks: args are required")
	}
	if args.Name == "" || args.Location == "" || args.SystemNodes < 1 {
		return nil, fmt.Errorf("aks %q: name, location and a system pool are required", name)
	}
	c := &Cluster{}
	if err := ctx.RegisterComponentResource("kolotoc:aks:Cluster", name, c, opts...); err != nil {
		return nil, fmt.Errorf("aks %q: %w", name, err)
	}
	parent := pulumi.Parent(c)

	rg, err := resources.NewResourceGroup(ctx, name, &resources.ResourceGroupArgs{
		ResourceGroupName: pulumi.String(args.ResourceGroup),
		Location:          pulumi.String(args.Location),
		Tags:              pulumi.ToStringMap(args.Tags),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("aks %q: resource group %q: %w", name, name, err)
	}
	c.ResourceGroup = rg
	// Who runs `pulumi up`, as the azure-native provider signs in: the cluster trusts their
	// tenant, and they get cluster-admin through Azure RBAC.
	caller := authorization.GetClientConfigOutput(ctx, pulumi.Parent(c))
	cluster, err := containerservice.NewManagedCluster(ctx, name, RenderCluster(args, rg.Name, caller.TenantId()), parent, pulumi.Protect(args.Protect),
		// The user pools are AgentPool resources of their own; the cluster must not claim them.
		pulumi.IgnoreChanges([]string{"agentPoolProfiles"}))
	if err != nil {
		return nil, fmt.Errorf("aks %q: managed cluster %q: %w", name, name, err)
	}
	c.AdminAccess, err = authorization.NewRoleAssignment(ctx, name+"-admin", RenderAdminAccess(args, cluster.ID(), caller.SubscriptionId(), caller.ObjectId()), parent)
	if err != nil {
		return nil, fmt.Errorf("aks %q: role assignment %q: %w", name, name+"-admin", err)
	}
	var poolDeps []pulumi.Resource
	if args.SubnetID != "" {
		// The identity exists once the cluster does: the grant follows it, and the user pools,
		// whose scale sets AKS joins to the subnet with it, follow the grant.
		c.SubnetAccess, err = authorization.NewRoleAssignment(ctx, name+"-subnet", RenderSubnetAccess(args, cluster.Identity.Elem().PrincipalId()), parent)
		if err != nil {
			return nil, fmt.Errorf("aks %q: role assignment %q: %w", name, name+"-subnet", err)
		}
		poolDeps = append(poolDeps, c.SubnetAccess)
	}
	if args.ACRID != "" {
		kubelet := cluster.IdentityProfile.MapIndex(pulumi.String(KubeletIdentity)).ObjectId().Elem()
		c.RegistryAccess, err = authorization.NewRoleAssignment(ctx, name+"-acr", RenderRegistryAccess(args, kubelet), parent)
		if err != nil {
			return nil, fmt.Errorf("aks %q: role assignment %q: %w", name, name+"-acr", err)
		}
	}
	for _, p := range args.Pools {
		var ppg pulumi.StringInput
		if p.Compact {
			g, err := compute.NewProximityPlacementGroup(ctx, name+"-"+p.Name, RenderPlacementGroup(args, p, rg.Name), parent)
			if err != nil {
				return nil, fmt.Errorf("aks %q: pool %s: %w", name, p.Name, err)
			}
			if c.PlacementGroups == nil {
				c.PlacementGroups = map[string]*compute.ProximityPlacementGroup{}
			}
			c.PlacementGroups[p.Name] = g
			ppg = g.ID()
		}
		ap, err := containerservice.NewAgentPool(ctx, name+"-"+p.Name, RenderAgentPool(args, p, rg.Name, cluster.Name, ppg), parent,
			pulumi.Timeouts(AgentPoolTimeouts), pulumi.DependsOn(poolDeps),
			// A generated name lets the new pool exist beside the old: a GPU pool keeps its GPUs
			// until its replacement has nodes, and a stockout fails the creation, not the pool.
			pulumi.DeleteBeforeReplace(p.DeleteFirst || p.CloudName != ""),
			pulumi.IgnoreChanges(ignoredPoolChanges(p)))
		if err != nil {
			return nil, fmt.Errorf("aks %q: agent pool %q: %w", name, name+"-"+p.Name, err)
		}
		c.AgentPools = append(c.AgentPools, ap)
	}

	// The user credentials are read for the cluster's CA alone: with Entra ID they hold no secret,
	// and the kubeconfig is rebuilt from the server and the CA, so nothing AKS adds to them (a
	// token, a client certificate) ever reaches the state.
	creds := containerservice.ListManagedClusterUserCredentialsOutput(ctx, containerservice.ListManagedClusterUserCredentialsOutputArgs{
		ResourceGroupName: rg.Name,
		ResourceName:      cluster.Name,
	}, pulumi.Parent(c))
	server := cluster.Fqdn
	if args.PrivateEndpoint {
		server = cluster.PrivateFQDN
	}
	c.ClusterName = cluster.Name
	// The admin role's ID joins the inputs so that the Kubernetes provider, configured with this
	// kubeconfig, waits for the grant it needs.
	c.Kubeconfig = pulumi.ToSecret(pulumi.All(cluster.Name, server, creds.Kubeconfigs().Index(pulumi.Int(0)).Value(), c.AdminAccess.ID()).ApplyT(
		func(v []any) (string, error) {
			ca, err := caData(v[2].(string))
			if err != nil {
				return "", fmt.Errorf("aks %q: the user kubeconfig: %w", name, err)
			}
			return Kubeconfig(v[0].(string), v[1].(string), ca), nil
		})).(pulumi.StringOutput)
	return c, meta.RegisterOutputs(ctx, c, pulumi.Map{"clusterName": c.ClusterName, "kubeconfig": c.Kubeconfig})
}

// RenderSubnetAccess grants the cluster's identity Network Contributor on the subnet it brings,
// as `az aks create --vnet-subnet-id` does; other tools must grant it themselves.
func RenderSubnetAccess(a *ClusterArgs, principal pulumi.StringInput) *authorization.RoleAssignmentArgs {
	return &authorization.RoleAssignmentArgs{
		Scope:            pulumi.String(a.SubnetID),
		PrincipalId:      principal,
		PrincipalType:    pulumi.String("ServicePrincipal"),
		RoleDefinitionId: pulumi.String(fmt.Sprintf("/subscriptions/%s/providers/Microsoft.Authorization/roleDefinitions/%s", a.Subscription, NetworkContributorRole)),
		Description:      pulumi.String("kolotoc: AKS " + a.Name + " joins its node pools to this subnet (kolotoc:cluster.subnetId)"),
	}
}

// RenderRegistryAccess lets the nodes pull from the registry ACRID: AcrPull for the kubelet
// identity, scoped to that registry alone, as `az aks update --attach-acr` grants it.
func RenderRegistryAccess(a *ClusterArgs, kubelet pulumi.StringInput) *authorization.RoleAssignmentArgs {
	return &authorization.RoleAssignmentArgs{
		Scope:            pulumi.String(a.ACRID),
		PrincipalId:      kubelet,
		PrincipalType:    pulumi.String("ServicePrincipal"),
		RoleDefinitionId: pulumi.String(fmt.Sprintf("/subscriptions/%s/providers/Microsoft.Authorization/roleDefinitions/%s", a.ACRSubscription, AcrPullRole)),
		Description:      pulumi.String("kolotoc: the nodes of AKS " + a.Name + " pull images from this registry (kolotoc:cluster.acrId)"),
	}
}

// RenderAdminAccess grants the principal that runs `pulumi up` (its object ID, of subscription
// subscription) the RBAC Cluster Admin role on the cluster alone.
func RenderAdminAccess(a *ClusterArgs, cluster pulumi.IDOutput, subscription, principal pulumi.StringOutput) *authorization.RoleAssignmentArgs {
	return &authorization.RoleAssignmentArgs{
		Scope:         cluster.ToStringOutput(),
		PrincipalId:   principal,
		PrincipalType: pulumi.String(adminPrincipalType(a)),
		RoleDefinitionId: subscription.ApplyT(func(s string) string {
			return fmt.Sprintf("/subscriptions/%s/providers/Microsoft.Authorization/roleDefinitions/%s", s, RBACClusterAdminRole)
		}).(pulumi.StringOutput),
		Description: pulumi.String("kolotoc: whoever runs pulumi up for AKS " + a.Name + " manages its Kubernetes objects (local accounts are off)"),
	}
}

func adminPrincipalType(a *ClusterArgs) string {
	if a.AdminPrincipalType == "" {
		return AdminPrincipalTypes[0]
	}
	return a.AdminPrincipalType
}

// RenderCluster builds the managed cluster with its system pool. The system pool runs AKS's own
// pods; Kolotoc's workloads select their pools by label and never land there. Sign-in is
// Microsoft Entra ID of tenant, authorization Azure RBAC, and local accounts are off, so no
// static credential to the cluster exists (AKS, "Manage local accounts with AKS-managed
// Microsoft Entra integration").
func RenderCluster(a *ClusterArgs, resourceGroup, tenant pulumi.StringInput) *containerservice.ManagedClusterArgs {
	mc := &containerservice.ManagedClusterArgs{
		ResourceName:      pulumi.String(a.Name),
		ResourceGroupName: resourceGroup,
		Location:          pulumi.String(a.Location),
		DnsPrefix:         pulumi.String(a.Name),
		NodeResourceGroup: pulumi.String(a.NodeResourceGroup),
		EnableRBAC:        pulumi.Bool(true),
		AadProfile: &containerservice.ManagedClusterAADProfileArgs{
			Managed:         pulumi.Bool(true),
			EnableAzureRBAC: pulumi.Bool(true),
			TenantID:        tenant,
		},
		DisableLocalAccounts: pulumi.Bool(true),
		Identity:             &containerservice.ManagedClusterIdentityArgs{Type: containerservice.ResourceIdentityTypeSystemAssigned},
		AgentPoolProfiles: containerservice.ManagedClusterAgentPoolProfileArray{containerservice.ManagedClusterAgentPoolProfileArgs{
			Name:   pulumi.String("system"),
			Mode:   pulumi.String("System"),
			OsType: pulumi.String("Linux"),
			VmSize: pulumi.String(a.SystemVMSize),
			Count:  pulumi.Int(a.SystemNodes),
			Type:   pulumi.String("VirtualMachineScaleSets"),
			// nil without a subnet of the user's: AKS makes the network.
			VnetSubnetID: optional(a.SubnetID),
		}},
		// Azure CNI (overlay) powered by Cilium: it enforces NetworkPolicy, which AKS's default
		// kubenet network does not. Chosen when the cluster is created.
		NetworkProfile: &containerservice.ContainerServiceNetworkProfileArgs{
			NetworkPlugin:     pulumi.String(NetworkPlugin),
			NetworkPluginMode: pulumi.String(NetworkPluginMode),
			NetworkDataplane:  pulumi.String(NetworkDataplane),
			NetworkPolicy:     pulumi.String(NetworkPolicy),
			// With a subnet of the user's, both ranges must stay outside its virtual network.
			ServiceCidr:  optional(a.ServiceCIDR),
			DnsServiceIP: optional(a.DNSServiceIP),
			PodCidr:      optional(a.PodCIDR),
		},
		Tags: pulumi.ToStringMap(a.Tags),
	}
	if len(a.AuthorizedNetworks) > 0 || a.PrivateEndpoint {
		// A private cluster is chosen when the cluster is created; its API server gets a private
		// address and DNS zone in the node resource group.
		access := &containerservice.ManagedClusterAPIServerAccessProfileArgs{EnablePrivateCluster: pulumi.Bool(a.PrivateEndpoint)}
		if len(a.AuthorizedNetworks) > 0 {
			access.AuthorizedIPRanges = pulumi.ToStringArray(a.AuthorizedNetworks)
		}
		mc.ApiServerAccessProfile = access
	}
	if a.KubernetesVersion != "" {
		mc.KubernetesVersion = pulumi.String(a.KubernetesVersion)
	}
	return mc
}

// RenderPlacementGroup is a compact pool's proximity placement group, in the cluster's resource
// group and region; in the pool's zone when it names one.
func RenderPlacementGroup(a *ClusterArgs, p Pool, resourceGroup pulumi.StringInput) *compute.ProximityPlacementGroupArgs {
	g := &compute.ProximityPlacementGroupArgs{
		ProximityPlacementGroupName: pulumi.String(a.Name + "-" + p.Name),
		ProximityPlacementGroupType: pulumi.String(ProximityPlacementType),
		ResourceGroupName:           resourceGroup,
		Location:                    pulumi.String(a.Location),
		Tags:                        pulumi.ToStringMap(a.Tags),
	}
	if len(p.Zones) > 0 {
		g.Zones = pulumi.ToStringArray(p.Zones[:1])
	}
	return g
}

// RenderAgentPool builds one user agent pool; ppg is its proximity placement group's ID, nil for
// none.
func RenderAgentPool(a *ClusterArgs, p Pool, resourceGroup, cluster, ppg pulumi.StringInput) *containerservice.AgentPoolArgs {
	ap := &containerservice.AgentPoolArgs{
		AgentPoolName:     pulumi.String(PoolName(a, p)),
		ResourceGroupName: resourceGroup,
		ResourceName:      cluster,
		Mode:              pulumi.String("User"),
		OsType:            pulumi.String("Linux"),
		Type:              pulumi.String("VirtualMachineScaleSets"),
		VmSize:            pulumi.String(p.VMSize),
		Count:             pulumi.Int(p.Nodes),
		OsDiskSizeGB:      pulumi.Int(osDiskGiB),
		NodeLabels:        pulumi.ToStringMap(p.Labels),
		Tags:              pulumi.ToStringMap(a.Tags),
		VnetSubnetID:      optional(a.SubnetID),
	}
	var taints pulumi.StringArray
	for _, t := range p.Taints { // AKS takes kubectl's notation
		taints = append(taints, pulumi.String(t.String()))
	}
	if p.Spot {
		taints = append(taints, pulumi.String(SpotTaint))
	}
	if len(taints) > 0 {
		ap.NodeTaints = taints
	}
	if len(p.Zones) > 0 {
		ap.AvailabilityZones = pulumi.ToStringArray(p.Zones)
	}
	if ppg != nil {
		ap.ProximityPlacementGroupID = ppg
	}
	if autoscaled(p) {
		ap.EnableAutoScaling = pulumi.Bool(true)
		ap.MinCount = pulumi.Int(p.MinNodes)
		ap.MaxCount = pulumi.Int(p.MaxNodes)
	}
	if p.Spot {
		ap.ScaleSetPriority = pulumi.String("Spot")
		ap.ScaleSetEvictionPolicy = pulumi.String(SpotEvictionPolicy)
		ap.SpotMaxPrice = pulumi.Float64(spotMaxPrice)
	}
	return ap
}

// Agent pool names (AKS, "Create node pools": a Linux pool's name is 1-12 lower-case letters and
// digits, starting with a letter): a generated name is the pool's name cut to poolStemLen and
// poolHashLen hexadecimal digits of what the pool is made of.
const (
	PoolNameMax = 12
	poolHashLen = 4
	poolStemLen = PoolNameMax - poolHashLen
)

// PoolName is the agent pool's name: its CloudName, or the pool's name cut to 8 characters and a
// hash of every setting AKS fixes when it creates a pool (VM size, OS disk, zones, subnet,
// priority, placement), so a change to any of them is a new name, and the new pool is created
// beside the old one. Azure's own agent pool ID is unchanged by anything else (the count,
// autoscaling, labels, taints and tags are updated in place).
func PoolName(a *ClusterArgs, p Pool) string {
	if p.CloudName != "" {
		return p.CloudName
	}
	stem := p.Name
	if len(stem) > poolStemLen {
		stem = stem[:poolStemLen]
	}
	h := sha256.New()
	for _, v := range []string{p.Name, p.VMSize, fmt.Sprint(osDiskGiB), strings.Join(p.Zones, ","), a.SubnetID,
		fmt.Sprint(p.Spot), fmt.Sprint(p.Compact), "Linux", "VirtualMachineScaleSets"} {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return stem + hex.EncodeToString(h.Sum(nil))[:poolHashLen]
}

func autoscaled(p Pool) bool { return p.MinNodes < p.MaxNodes }

// optional is an input that is left out when empty, so that Azure's default applies.
func optional(s string) pulumi.StringPtrInput {
	if s == "" {
		return nil
	}
	return pulumi.String(s)
}

func ignoredPoolChanges(p Pool) []string {
	if autoscaled(p) {
		return []string{"count"} // the cluster autoscaler owns it
	}
	return nil
}
