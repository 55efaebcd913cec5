package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"kolotoc/stacks"
)

// properNames are exported Go names of the config types that are also the names of what they
// configure, and so belong in the user's text.
var properNames = map[string]bool{
	"TensorBoard":  true, // the TensorFlow tool (tfcluster.tensorboard's field)
	"LocalQueue":   true, // Kueue's object kinds (queue.localQueue, queue.clusterQueue)
	"ClusterQueue": true,
}

// goNames are the exported CamelCase names (two humps at least: SubnetID, GPUsPerNode; not CPU) a reader of the Go code knows the config by: the
// config types and their fields, every type a stack file's value decodes into.
func goNames() map[string]bool {
	names := map[string]bool{}
	seen := map[reflect.Type]bool{}
	camel := regexp.MustCompile(`^[A-Z]+[a-z0-9]+[A-Z]`)
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		if camel.MatchString(t.Name()) {
			names[t.Name()] = true
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if camel.MatchString(f.Name) {
				names[f.Name] = true
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(stacks.Config{}))
	for n := range properNames {
		delete(names, n)
	}
	return names
}

// The generated reference and Pulumi.yaml's descriptions read as the user's documentation: no
// Go identifier of the config types (a field's Go name, SubnetID, CarriersConfig), no Default…
// constant in place of its value, no Go file the user never opens (runs.go), and no key path with
// a Go field in it (elastic.rdzvConf.Values: the user writes elastic.rdzvConf as a map).
func TestGeneratedFilesReadAsUserDocs(t *testing.T) {
	names := goNames()
	if !names["CarriersConfig"] || !names["SubnetID"] || !names["RetentionDays"] {
		t.Fatalf("the Go names found are not the config types': %d of them", len(names))
	}
	var patterns []string
	for n := range names {
		patterns = append(patterns, regexp.QuoteMeta(n))
	}
	sort.Strings(patterns)
	goName := regexp.MustCompile(`\b(` + strings.Join(patterns, "|") + `)\b`)
	defaultConst := regexp.MustCompile(`\bDefault[A-Z]\w*`)
	goFile := regexp.MustCompile(`[\w/-]+\.go\b`)
	goSegment := regexp.MustCompile("(?:\\*\\*`|^  )[a-zA-Z]+(?:\\[\\])?(?:\\.[a-zA-Z<>]+(?:\\[\\])?)*\\.[A-Z]\\w*")
	project := filepath.Join(root, ProjectFile)
	for _, f := range []string{filepath.Join(root, ReferenceFile), project} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if f == project { // the hand-written head of Pulumi.yaml is not generated
			text = text[strings.Index(text, projectHeader[:40]):]
		}
		for i, line := range strings.Split(text, "\n") {
			for _, c := range []struct {
				what string
				re   *regexp.Regexp
			}{{"a Go identifier", goName}, {"a Default… constant", defaultConst}, {"a Go file", goFile}, {"a Go field in a key path", goSegment}} {
				if m := c.re.FindString(line); m != "" {
					t.Errorf("%s:%d: %s, %q: %s", filepath.Base(f), i+1, c.what, m, line)
				}
			}
		}
	}
}

// Pulumi.yaml's descriptions keep a value's case: kolotoc:cloud allows simulated, not Simulated.
func TestCapitalizeKeepsValues(t *testing.T) {
	for _, c := range []struct{ in, allowed, want string }{
		{"simulated | existing | gcp", "simulated, existing, gcp", "simulated | existing | gcp"},
		{"towers.count > 0", "", "towers.count > 0"},
		{"take the namespace over", "", "Take the namespace over"},
	} {
		if got := capitalize(c.in, c.allowed); got != c.want {
			t.Errorf("capitalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
