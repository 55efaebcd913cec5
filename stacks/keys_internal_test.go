package stacks

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every field of Config but the project's and the stack's names is a key (its `key` tag): a
// field without one would never be decoded, documented or declared in Pulumi.yaml. The secret
// keys are the fields that hold secrets.
func TestEveryConfigFieldIsAKey(t *testing.T) {
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, tagged := f.Tag.Lookup("key")
		if f.Name == "Project" || f.Name == "Stack" {
			if tagged {
				t.Errorf("Config.%s is the Pulumi project's or stack's name, not a key, yet tagged %q", f.Name, name)
			}
			continue
		}
		if !tagged {
			t.Errorf("Config.%s has no key tag: no key would fill it", f.Name)
			continue
		}
		k, ok := configKeys[name]
		if !ok || k.index != i {
			t.Errorf("key %s does not decode into Config.%s", name, f.Name)
		}
		holdsSecret := strings.Contains(f.Type.String(), "Secret")
		if k.secret != holdsSecret || slices.Contains(secretKeys, name) != holdsSecret {
			t.Errorf("key %s: secret %v, but Config.%s is a %s", name, k.secret, f.Name, f.Type)
		}
	}
}

// The CLI hands the program Pulumi.yaml's default of every key a stack leaves unset; dropped,
// they are unset for every reader: kolotoc:previewOf's "" does not make a stack a preview copy.
func TestDropProjectDefaults(t *testing.T) {
	raw := Raw{Project: "kolotoc", Stack: "dev", Secrets: map[string]bool{"kolotoc:jupyterPassword": true},
		Values: map[string]string{"kolotoc:cloud": "simulated", "gcp:project": ""}}
	for _, k := range Keys() {
		if d, ok := k.ProjectDefault(); ok {
			raw.Values[ConfigNamespace+":"+k.Name] = d
		}
	}
	raw.Values["kolotoc:jupyterPassword"] = "" // set as a secret, even empty: the user's, kept
	DropProjectDefaults(&raw)
	want := map[string]string{"kolotoc:cloud": "simulated", "gcp:project": "", "kolotoc:jupyterPassword": ""}
	if !reflect.DeepEqual(raw.Values, want) {
		t.Errorf("after DropProjectDefaults: %v, want %v", raw.Values, want)
	}
	if err := previewCopy(&raw, true); err != nil {
		t.Errorf("a stack with Pulumi.yaml's defaults is taken for a preview copy: %v", err)
	}
}
