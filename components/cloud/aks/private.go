package aks

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// The storage account behind a private endpoint (FilesArgs.PrivateEndpoint): its public endpoint
// refuses every network (publicNetworkAccess Disabled), and the cluster reaches the share at a
// private address in its own subnet, which <account>.file.core.windows.net resolves to through
// the privatelink zone linked to the subnet's virtual network.
//
// These four resources are azure-native's network module, registered by their type tokens: the
// module's Go package takes 5.6 GB and minutes to compile (measured on the build machine), for four resources. Their
// input names are those of pulumi-azure-native-sdk/network/v2 v2.90.0 (privateEndpoint.go,
// privateZone.go, virtualNetworkLink.go, privateDnsZoneGroup.go); tests/clouds_access_test.go
// checks each registration.
const (
	PrivateEndpointType     = "azure-native:network:PrivateEndpoint"
	PrivateZoneType         = "azure-native:network:PrivateZone"
	VirtualNetworkLinkType  = "azure-native:network:VirtualNetworkLink"
	PrivateDNSZoneGroupType = "azure-native:network:PrivateDnsZoneGroup"
	// FilesPrivateZone is the DNS zone Azure answers the file service's private addresses in.
	FilesPrivateZone = "privatelink.file.core.windows.net"
	// filesGroupID is the account's sub-resource the endpoint connects to: the file service.
	filesGroupID = "file"
	// privateZoneLocation: private DNS zones and their links are global resources.
	privateZoneLocation = "global"
)

// networkResource is an azure-native network resource registered by its token; Kolotoc reads
// nothing of it but its ID.
type networkResource struct{ pulumi.CustomResourceState }

// VirtualNetworkID is the virtual network of a subnet's resource ID
// (…/virtualNetworks/<vnet>/subnets/<subnet>), or "" when subnetID is not one.
func VirtualNetworkID(subnetID string) string {
	i := strings.LastIndex(strings.ToLower(subnetID), "/subnets/")
	if i < 0 || !strings.Contains(strings.ToLower(subnetID[:i]), "/providers/microsoft.network/virtualnetworks/") {
		return ""
	}
	return subnetID[:i]
}

// privateEndpoint registers the account's private endpoint in the subnet, the privatelink zone
// and its link to the virtual network (unless args.PrivateDNSZoneID names a zone already linked
// there), and the endpoint's zone group, which writes the account's private address into the
// zone. It returns what a mount must wait for: the zone group (and the link).
func privateEndpoint(ctx *pulumi.Context, name string, a *FilesArgs, accountID pulumi.StringInput, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	endpointName := a.Account + "-files"
	var pe networkResource
	if err := ctx.RegisterResource(PrivateEndpointType, name, pulumi.Map{
		"privateEndpointName": pulumi.String(endpointName),
		"resourceGroupName":   a.ResourceGroup,
		"location":            pulumi.String(a.Location),
		"subnet":              pulumi.Map{"id": pulumi.String(a.SubnetID)},
		"privateLinkServiceConnections": pulumi.Array{pulumi.Map{
			"name":                 pulumi.String(endpointName),
			"privateLinkServiceId": accountID,
			"groupIds":             pulumi.ToStringArray([]string{filesGroupID}),
		}},
		"tags": pulumi.ToStringMap(a.Tags),
	}, &pe, opts...); err != nil {
		return nil, fmt.Errorf("private endpoint %q: %w", name, err)
	}
	ready := []pulumi.Resource{}
	zoneID := pulumi.String(a.PrivateDNSZoneID).ToStringOutput()
	if a.PrivateDNSZoneID == "" {
		var zone networkResource
		if err := ctx.RegisterResource(PrivateZoneType, name, pulumi.Map{
			"privateZoneName":   pulumi.String(FilesPrivateZone),
			"resourceGroupName": a.ResourceGroup,
			"location":          pulumi.String(privateZoneLocation),
			"tags":              pulumi.ToStringMap(a.Tags),
		}, &zone, opts...); err != nil {
			return nil, fmt.Errorf("private DNS zone %q: %w", name, err)
		}
		var link networkResource
		if err := ctx.RegisterResource(VirtualNetworkLinkType, name, pulumi.Map{
			"privateZoneName":        pulumi.String(FilesPrivateZone),
			"virtualNetworkLinkName": pulumi.String(a.Account + "-vnet"),
			"resourceGroupName":      a.ResourceGroup,
			"location":               pulumi.String(privateZoneLocation),
			"virtualNetwork":         pulumi.Map{"id": pulumi.String(VirtualNetworkID(a.SubnetID))},
			// The nodes resolve the zone; nothing registers its own name in it.
			"registrationEnabled": pulumi.Bool(false),
			"tags":                pulumi.ToStringMap(a.Tags),
		}, &link, with(opts, pulumi.DependsOn([]pulumi.Resource{&zone}))...); err != nil {
			return nil, fmt.Errorf("virtual network link %q: %w", name, err)
		}
		zoneID = zone.ID().ToStringOutput()
		ready = append(ready, &link)
	}
	var group networkResource
	if err := ctx.RegisterResource(PrivateDNSZoneGroupType, name, pulumi.Map{
		"privateEndpointName":     pulumi.String(endpointName),
		"privateDnsZoneGroupName": pulumi.String("default"),
		"resourceGroupName":       a.ResourceGroup,
		"privateDnsZoneConfigs": pulumi.Array{pulumi.Map{
			"name":             pulumi.String(filesGroupID),
			"privateDnsZoneId": zoneID,
		}},
	}, &group, with(opts, pulumi.DependsOn([]pulumi.Resource{&pe}))...); err != nil {
		return nil, fmt.Errorf("private DNS zone group %q: %w", name, err)
	}
	return append(ready, &group), nil
}

// with is opts and more, in a slice of its own.
func with(opts []pulumi.ResourceOption, more ...pulumi.ResourceOption) []pulumi.ResourceOption {
	return append(append([]pulumi.ResourceOption{}, opts...), more...)
}

// checkPrivateEndpoint refuses what a private endpoint cannot serve.
func checkPrivateEndpoint(name string, a *FilesArgs) error {
	if !a.PrivateEndpoint {
		if a.PrivateDNSZoneID != "" {
			return fmt.Errorf("files %q: a private DNS zone without a private endpoint", name)
		}
		return nil
	}
	if a.Protocol != NFS || VirtualNetworkID(a.SubnetID) == "" {
		return fmt.Errorf("files %q: a private endpoint needs an NFS share and the subnet's resource ID", name)
	}
	return nil
}
