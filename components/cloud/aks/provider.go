package aks

import (
	azurenative "github.com/pulumi/pulumi-azure-native-sdk/v2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// NewProvider is the stack's Azure provider, in its location.
func NewProvider(ctx *pulumi.Context, name, location string) (pulumi.ProviderResource, error) {
	return azurenative.NewProvider(ctx, name, &azurenative.ProviderArgs{Location: pulumi.String(location)})
}
