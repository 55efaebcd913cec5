package workloads_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestImportsEveryEntry: workloads.go imports every entry package under it, itself. An entry
// imported only through another entry (the towers import the sentinels') would be registered
// today and lost the day that import goes.
func TestImportsEveryEntry(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "workloads.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var imported []string
	for _, s := range f.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		imported = append(imported, filepath.Base(p))
	}
	dirs, _ := filepath.Glob("*/*.go")
	var entries []string
	for _, d := range dirs {
		entries = append(entries, filepath.Dir(d))
	}
	slices.Sort(imported)
	slices.Sort(entries)
	entries = slices.Compact(entries)
	if !slices.Equal(imported, entries) {
		t.Errorf("workloads.go imports %v; the entry packages are %v", imported, entries)
	}
}
