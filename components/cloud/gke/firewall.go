package gke

import (
	"fmt"

	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/container"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// FirewallType is the type token of a VPC firewall rule in pulumi-gcp v7. Kolotoc registers the
// rule by its token with the inputs the provider's schema names (the fields and pulumi tags of
// compute.FirewallArgs and compute.FirewallAllow), not through the SDK's compute package: that
// package alone was still compiling after 13 minutes at 5 GB resident (2026-11-28, on a 2-core
// machine shared with other builds), for one resource, in every cold build of the program;
// Kolotoc avoids azure-native's network package for the same reason.
const FirewallType = "gcp:compute/firewall:Firewall"

// Firewall is a registered firewall rule.
type Firewall struct {
	pulumi.CustomResourceState
	Name pulumi.StringOutput `pulumi:"name"`
}

// WebhookFirewallPriority: below GKE's default 1000, so that a deny at the default priority does
// not shadow the control plane's access (lower numbers win,
// https://cloud.google.com/firewall/docs/firewalls#priority_order_for_firewall_rules).
const WebhookFirewallPriority = 900

// WebhookFirewallName is the firewall rule's name: within GCE's 63 characters (the cluster's
// name is at most 40).
func WebhookFirewallName(cluster string) string { return cluster + "-webhooks" }

// RenderWebhookFirewall admits the control plane to the webhooks' ports on the cluster's nodes
// (the pods' addresses are the nodes' alias ranges): an ingress rule from the control plane's
// range, on the nodes that run as the cluster's node account. GKE's own rule for a private
// cluster (gke-<cluster>-<hash>-master) opens only TCP 443 and 10250, so a webhook served on
// another port times out and every request it intercepts fails
// (https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#add_firewall_rules,
// "Adding firewall rules for specific use cases";
// https://cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules). The source is the
// control plane's range GKE reports (privateClusterConfig.masterIpv4CidrBlock, VPC peering), or
// its private endpoint's address where it reports none (Private Service Connect). The inputs
// are compute.FirewallArgs' (name, project, network, description, direction, priority,
// sourceRanges, targetServiceAccounts, allows: [{protocol, ports}]).
func RenderWebhookFirewall(a *ClusterArgs, cluster *container.Cluster, nodeAccount pulumi.StringInput) pulumi.Map {
	ports := make([]string, len(a.WebhookPorts))
	for i, p := range a.WebhookPorts {
		ports[i] = fmt.Sprint(p)
	}
	pcc := cluster.PrivateClusterConfig
	source := pulumi.All(pcc.MasterIpv4CidrBlock(), pcc.PrivateEndpoint()).ApplyT(func(v []any) []string {
		if cidr := deref(v[0].(*string)); cidr != "" {
			return []string{cidr}
		}
		return []string{deref(v[1].(*string)) + "/32"}
	}).(pulumi.StringArrayOutput)
	in := pulumi.Map{
		"name":                  pulumi.String(WebhookFirewallName(a.Name)),
		"network":               pulumi.String(a.Network),
		"description":           pulumi.String("Kolotoc: the GKE control plane of " + a.Name + " to its admission webhooks"),
		"direction":             pulumi.String("INGRESS"),
		"priority":              pulumi.Int(WebhookFirewallPriority),
		"sourceRanges":          source,
		"targetServiceAccounts": pulumi.StringArray{nodeAccount},
		"allows":                pulumi.Array{pulumi.Map{"protocol": pulumi.String("tcp"), "ports": pulumi.ToStringArray(ports)}},
	}
	if a.Project != "" {
		in["project"] = pulumi.String(a.Project)
	}
	return in
}
