package eks

import (
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// NewProvider is the stack's AWS provider: its region, and the tags every AWS resource of the
// stack carries.
func NewProvider(ctx *pulumi.Context, name, region string, tags map[string]string) (pulumi.ProviderResource, error) {
	return aws.NewProvider(ctx, name, &aws.ProviderArgs{
		Region:      pulumi.String(region),
		DefaultTags: &aws.ProviderDefaultTagsArgs{Tags: pulumi.ToStringMap(tags)},
	})
}
