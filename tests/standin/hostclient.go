package standin

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"

// newHostClient connects to the engine's logging endpoint.
func newHostClient(addr string) (Host, error) {
	return provider.NewHostClient(addr)
}
