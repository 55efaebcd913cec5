// Command pulumi-resource-kubernetes is the real Kubernetes provider plugin of Pulumi, built from
// github.com/pulumi/pulumi-kubernetes/provider/v4 at the commit tagged v4.25.0. Nothing of the
// provider is written here: this main does what the upstream command's main does, with the two
// files that upstream embeds prepared by testbed/tools/tools.sh at build time instead of by
// upstream's generate.go. testbed/tools/tools.sh copies schema.json and terraform-mapping.json from
// the provider's module into this directory before `go build` (they are git-ignored); the package
// version is stamped into the schema here, as generate.go stamps it, from the version the linker
// sets (-X .../pkg/version.Version), so the schema and the plugin report the same release.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema.json
var schema []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

func main() {
	versioned, err := withVersion(schema, version.Version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-kubernetes: %v\n", err)
		os.Exit(1)
	}
	provider.Serve("kubernetes", version.Version, versioned, terraformMapping)
}

// withVersion returns the package schema with its top-level "version" set to v; every other
// field is kept byte for byte.
func withVersion(schema []byte, v string) ([]byte, error) {
	if v == "" {
		return nil, fmt.Errorf("no version: build with -ldflags -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=<release> (testbed/tools/tools.sh does)")
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(schema, &spec); err != nil {
		return nil, fmt.Errorf("the embedded schema: %w", err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	spec["version"] = raw
	return json.Marshal(spec)
}
