package gke

import (
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// NewProvider is the stack's GCP provider: its region, its project (the provider's default when
// ""), and the labels every GCP resource of the stack carries.
func NewProvider(ctx *pulumi.Context, name, region, project string, labels map[string]string) (pulumi.ProviderResource, error) {
	args := &gcp.ProviderArgs{Region: pulumi.String(region), DefaultLabels: pulumi.ToStringMap(labels)}
	if project != "" {
		args.Project = pulumi.String(project)
	}
	return gcp.NewProvider(ctx, name, args)
}
