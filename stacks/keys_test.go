package stacks

import (
	"reflect"
	"testing"
)

// Every key the program decodes has its field (keys.go), and no other key has one: the
// configuration reference and Pulumi.yaml are generated from keyFields.
func TestKeyFieldsMatchDecoders(t *testing.T) {
	if got, want := sortedKeys(keyFields), sortedKeys(topLevel); !reflect.DeepEqual(got, want) {
		t.Fatalf("keyFields has %v, topLevel decodes %v", got, want)
	}
	for _, k := range secretKeys {
		if _, ok := keyFields[k]; !ok {
			t.Errorf("secret key %s has no field", k)
		}
	}
}

// Pulumi gives a stack that leaves a key unset the default Pulumi.yaml declares (a plain value,
// even for a secret key): Load must read it as unset, with the same result as without it.
func TestProjectDefaultsReadAsUnset(t *testing.T) {
	base := Raw{Project: "kolotoc", Stack: "dev", Secrets: map[string]bool{"kolotoc:sshKeySeed": true, "kolotoc:jupyterPassword": true},
		Values: map[string]string{
			"kolotoc:cloud":           "simulated",
			"kolotoc:nodePools":       `[{"name":"gpu","nodes":2,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100"},{"name":"cpu"}]`,
			"kolotoc:sshKeySeed":      "9f2c4e7a1b8d3f6052e9a7c1d4b8f3e6a0c5d9e2f7b1a4c8e3d6f9a2b5c7e1d4",
			"kolotoc:jupyterPassword": "a-long-enough-password",
		}}
	want, err := Load(base)
	if err != nil {
		t.Fatal(err)
	}
	withDefaults := Raw{Project: base.Project, Stack: base.Stack, Secrets: base.Secrets, Values: map[string]string{}}
	for k, v := range base.Values {
		withDefaults.Values[k] = v
	}
	for _, k := range Keys() {
		if d, ok := k.ProjectDefault(); ok {
			if _, set := withDefaults.Values[ConfigNamespace+":"+k.Name]; !set {
				withDefaults.Values[ConfigNamespace+":"+k.Name] = d
			}
		}
	}
	got, err := Load(withDefaults)
	if err != nil {
		t.Fatalf("Pulumi.yaml's defaults refused: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Pulumi.yaml's defaults change the config:\n got %+v\nwant %+v", got, want)
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
