// Command kolotoc is the Pulumi program: it loads the stack's configuration and deploys the
// training environment it describes. Everything else lives in stacks/ (each workload's entry in
// stacks/workloads/<key>) and components/.
//
// `go run . validate <stack file> <stack>` loads a stack file as `pulumi up` of that stack would,
// without Pulumi and without the stack's secrets, prints its problems and exits 1 if there are
// any (make fit runs it before mirroring a stack: stacks.ValidateStackFile).
package main

import (
	"fmt"
	"os"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"    // registers every cloud's entry
	_ "kolotoc/stacks/workloads" // registers every workload's entry
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "validate" {
		os.Exit(validate(os.Args[2], os.Args[3]))
	}
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

// validate prints a stack file's problems (its secrets aside); 0 when it has none.
func validate(path, stack string) int {
	problems, err := stacks.ValidateStackFile(path, "kolotoc", stack)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 1
	}
	if len(problems) == 0 {
		return 0
	}
	fmt.Fprintf(os.Stderr, "stack %q: %d configuration problem(s), as `pulumi up` of it would report them:\n", stack, len(problems))
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "  - %s\n", p.Error())
	}
	return 1
}
