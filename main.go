// Command kolotoc is the Pulumi program: it loads the stack's configuration and deploys the
// training environment it describes. Everything else lives in stacks/ (each workload's entry in
// stacks/workloads/<key>) and components/.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"    // registers every cloud's entry
	_ "kolotoc/stacks/workloads" // registers every workload's entry
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		raw, err := stacks.RawFromEnv(ctx)
		if err != nil {
			return err
		}
		cfg, err := stacks.Load(raw)
		if err != nil {
			return err
		}
		return stacks.Deploy(ctx, cfg)
	})
}
