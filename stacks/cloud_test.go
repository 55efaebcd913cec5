package stacks_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
)

// TestImportsEveryCloud: clouds/clouds.go imports every entry package under it, itself, and every
// cloud name of the stack (stacks' cloudNames) has its entry registered. An entry imported only
// through another package would be registered today and lost the day that import goes; a name
// without an entry would be refused as no cloud.
func TestImportsEveryCloud(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "clouds/clouds.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var imported []string
	for _, s := range f.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		imported = append(imported, filepath.Base(p))
	}
	files, _ := filepath.Glob("clouds/*/*.go")
	var entries []string
	for _, f := range files {
		entries = append(entries, filepath.Base(filepath.Dir(f)))
	}
	slices.Sort(imported)
	slices.Sort(entries)
	entries = slices.Compact(entries)
	if !slices.Equal(imported, entries) {
		t.Errorf("clouds/clouds.go imports %v; the entry packages are %v", imported, entries)
	}
	var registered []string
	for _, cl := range stacks.RegisteredClouds() {
		registered = append(registered, cl.Name)
	}
	if !slices.Equal(registered, stacks.CloudNames) {
		t.Errorf("registered clouds %v, want one entry for each of %v, in that order", registered, stacks.CloudNames)
	}
	// Each entry's package is named as its cloud, so that a reader finds it by the name.
	if named := slices.Sorted(slices.Values(registered)); !slices.Equal(named, entries) {
		t.Errorf("entry packages %v are not named as the clouds %v", entries, named)
	}
}
