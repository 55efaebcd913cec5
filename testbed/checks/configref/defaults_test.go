package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"kolotoc/stacks"
)

// Every default the committed reference shows is what stacks.Load fills in that cloud's minimal
// stack, and every setting Load fills there (one the minimal stack leaves unset) shows a default
// for that cloud: a default changed in the code without `go run ./testbed/checks/configref` fails
// here, naming the setting and the cloud. The values are read from the page and from Load's
// result by its JSON keys, not through the generator's code.
func TestShownDefaultsAreWhatLoadFills(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, ReferenceFile))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := shownDefaults(string(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(shown) < 250 || shown["awaitTimeout"][stacks.CloudGCP] == "" {
		t.Fatalf("read %d settings from the page, awaitTimeout's on gcp %q: the page's format changed?", len(shown), shown["awaitTimeout"][stacks.CloudGCP])
	}
	for _, m := range minimalStacks {
		raw := m.raw(false)
		cfg, err := stacks.Load(raw)
		if err != nil {
			t.Fatalf("the minimal %s stack: %v", m.Cloud, err)
		}
		tree := map[string]any{}
		for _, k := range stacks.Keys() {
			b, err := json.Marshal(k.Field(cfg))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			tree[k.Name] = v
		}
		set := setPaths(raw)
		for path, byCloud := range shown {
			want, got := byCloud[m.Cloud], loaded(tree, path, raw.Stack)
			switch {
			case set[path]:
				if want != "" {
					t.Errorf("%s on %s: the page shows default %q for a setting the minimal stack sets", path, m.Cloud, want)
				}
			case want == derived:
				if got == "" {
					t.Errorf("%s on %s: the page says derived, Load fills nothing", path, m.Cloud)
				}
			case want != got:
				t.Errorf("%s on %s: the page shows default %q, Load fills %q (run: go run ./testbed/checks/configref)", path, m.Cloud, want, got)
			}
		}
	}
}

// loaded is the value at path (towers.cpu, nodePools[].name: a list's first element) in tree, as
// the page writes a default: "" for nothing, an integer 0, an empty list or map; the stack's
// name as <stack>.
func loaded(tree map[string]any, path, stack string) string {
	var v any = tree
	for _, part := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(part, "[]")
		m, _ := v.(map[string]any)
		v = m[name]
		if list {
			l, _ := v.([]any)
			if len(l) == 0 {
				return ""
			}
			v = l[0]
		}
	}
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return strings.ReplaceAll(v, strings.ToLower(stack), "<stack>")
	case float64:
		if v == 0 {
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		if len(v) == 0 {
			return ""
		}
	case map[string]any:
		empty := true // a struct that decodes itself (elastic.rdzvConf) marshals its unset field as null
		for _, e := range v {
			empty = empty && e == nil
		}
		if empty {
			return ""
		}
	}
	b, _ := json.Marshal(v)
	return strings.ReplaceAll(string(b), strings.ToLower(stack), "<stack>")
}

// A default as the page writes it: "default `X`", "`Y` on simulated", "derived from other
// settings on gcp, aws and azure", the last one ending the attributes (")…" of a setting, ".*…"
// of a key).
var defaultSegment = regexp.MustCompile("^(default )?(?:`([^`]*)`|(" + derived + "))(?: on ([a-z]+(?:(?:, | and )[a-z]+)*))?(\\)(?::.*)?|\\.\\*.*)?$")

// shownDefaults reads the page's defaults: setting path → cloud → the value shown for that
// cloud, or derived; a setting without a default has an empty map. Objects and lists of objects
// are left out: their settings are listed.
func shownDefaults(page string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	lines := strings.Split(page, "\n")
	for i, line := range lines {
		var path, attrs string
		switch {
		case strings.HasPrefix(line, "## kolotoc:"):
			path = strings.TrimPrefix(line, "## kolotoc:")
			if i+2 >= len(lines) || !strings.HasPrefix(lines[i+2], "*") {
				return nil, fmt.Errorf("line %d: no attributes after %q", i+3, line)
			}
			attrs = strings.TrimPrefix(lines[i+2], "*")
		case strings.HasPrefix(line, "- **`"):
			var ok bool
			path, attrs, ok = strings.Cut(strings.TrimPrefix(line, "- **`"), "`** (")
			if !ok {
				return nil, fmt.Errorf("line %d: %q", i+1, line)
			}
		default:
			continue
		}
		segs := strings.Split(attrs, "; ")
		typ := segs[0]
		if i := strings.IndexAny(typ, ")*"); i >= 0 {
			typ = strings.TrimSuffix(typ[:i], ".")
		}
		if typ == "object" || typ == "list of object" {
			continue // its settings have the defaults
		}
		byCloud := map[string]string{}
		out[path] = byCloud
		if strings.ContainsAny(segs[0], ")*") {
			continue // the type alone
		}
		var unqualified string
		hasUnqualified := false
		for _, seg := range segs[1:] {
			if seg == "required" {
				continue
			}
			m := defaultSegment.FindStringSubmatch(seg)
			if m == nil {
				break // allowed: …, or the description
			}
			value := m[2]
			if m[3] != "" {
				value = derived
			}
			if m[4] == "" {
				unqualified, hasUnqualified = value, true
			}
			for _, c := range regexp.MustCompile(`, | and `).Split(m[4], -1) {
				if c != "" {
					byCloud[c] = value
				}
			}
			if m[5] != "" {
				break
			}
		}
		if hasUnqualified {
			for _, ms := range minimalStacks {
				if _, ok := byCloud[ms.Cloud]; !ok {
					byCloud[ms.Cloud] = unqualified
				}
			}
		}
	}
	return out, nil
}
