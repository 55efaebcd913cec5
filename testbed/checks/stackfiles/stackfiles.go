// Package stackfiles lists the stack files a checkout commits, for the tests that check every one.
package stackfiles

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Committed returns the paths (under root) of the stack files git tracks: Pulumi.<stack>.yaml
// beside Pulumi.yaml and in examples/*/. Not a glob: the e2e suite writes stack files of its own
// beside Pulumi.yaml while it runs, and make test runs it beside the unit tests, which would read
// (or lose, as it removes them) those files halfway.
func Committed(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "--", "Pulumi.*.yaml", "examples/*/Pulumi.*.yaml")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s (the committed stack files): %w", root, err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		files = append(files, filepath.Join(root, f))
	}
	return files, nil
}
