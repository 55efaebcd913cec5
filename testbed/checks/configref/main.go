// Command configref writes the configuration reference, docs/reference/configuration.md, and the
// config block of Pulumi.yaml from the program's own config types: every key with its type, the
// default the program fills, the values validation allows and the field's comment. Run it from
// the project directory after changing a config type, a default or a comment:
//
//	go run ./testbed/checks/configref
//
// `go test ./testbed/checks/configref` (part of make test) fails while either file differs from
// what this writes, so the reference cannot drift from the code.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	_ "kolotoc/stacks/clouds"    // the clouds' entries: stacks.Load refuses to run without them
	_ "kolotoc/stacks/workloads" // the workloads' entries: stacks.Load refuses to run without them
)

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "configref:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	ref, err := Reference(root)
	if err != nil {
		return err
	}
	project, err := os.ReadFile(filepath.Join(root, ProjectFile))
	if err != nil {
		return err
	}
	newProject, err := ProjectYAML(project, ref)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(ReferenceFile)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, ReferenceFile), []byte(Markdown(ref)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, ProjectFile), newProject, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s's config block (%d keys, %d settings)\n", ReferenceFile, ProjectFile, len(ref.Keys), ref.Rows())
	return nil
}
