package stacks_test

import (
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"reflect"
	"testing"
)

// Pulumi gives a stack that leaves a key unset the default Pulumi.yaml declares (a plain value,
// even for a secret key): Load must read it as unset, with the same result as without it.
func TestProjectDefaultsReadAsUnset(t *testing.T) {
	base := stacks.Raw{Project: "kolotoc", Stack: "dev", Secrets: map[string]bool{"kolotoc:sshKeySeed": true, "kolotoc:jupyterPassword": true},
		Values: map[string]string{
			"kolotoc:cloud":           "simulated",
			"kolotoc:nodePools":       `[{"name":"gpu","nodes":2,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100"},{"name":"cpu"}]`,
			"kolotoc:sshKeySeed":      "9f2c4e7a1b8d3f6052e9a7c1d4b8f3e6a0c5d9e2f7b1a4c8e3d6f9a2b5c7e1d4",
			"kolotoc:jupyterPassword": "a-long-enough-password",
		}}
	want, err := stacks.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	withDefaults := stacks.Raw{Project: base.Project, Stack: base.Stack, Secrets: base.Secrets, Values: map[string]string{}}
	for k, v := range base.Values {
		withDefaults.Values[k] = v
	}
	for _, k := range stacks.Keys() {
		if d, ok := k.ProjectDefault(); ok {
			if _, set := withDefaults.Values[stacks.ConfigNamespace+":"+k.Name]; !set {
				withDefaults.Values[stacks.ConfigNamespace+":"+k.Name] = d
			}
		}
	}
	got, err := stacks.Load(withDefaults)
	if err != nil {
		t.Fatalf("Pulumi.yaml's defaults refused: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Pulumi.yaml's defaults change the config:\n got %+v\nwant %+v", got, want)
	}
}
