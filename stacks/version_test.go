package stacks_test

import (
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"os"
	"regexp"
	"testing"
)

// TestChangelogNamesVersion: the latest release in CHANGELOG.md is the version the program
// stamps on every object, so that a release cannot name one and label objects with another.
func TestChangelogNamesVersion(t *testing.T) {
	b, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (\d+\.\d+\.\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md names no release (a `## X.Y.Z` heading)")
	}
	if string(m[1]) != stacks.Version {
		t.Errorf("CHANGELOG.md's latest release is %s, stacks.Version is %s", m[1], stacks.Version)
	}
}
