// Command pulumi-resource-kubernetes is the test bed's stand-in for the real Pulumi
// Kubernetes provider plugin. It is built only for Kolotoc's end-to-end suite and put on
// the Pulumi CLI's PATH where the real plugin cannot be installed; see package
// kolotoc/tests/standin for what it implements and what it does not.
package main

import (
	"fmt"
	"os"

	"kolotoc.dev/tests/standin"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

func main() {
	err := provider.Main("kubernetes", func(host *provider.HostClient) (pulumirpc.ResourceProviderServer, error) {
		if host == nil {
			return standin.New(nil), nil
		}
		return standin.New(host), nil
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-kubernetes (stand-in): %v\n", err)
		os.Exit(1)
	}
}
