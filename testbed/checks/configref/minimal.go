package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"kolotoc/stacks"
)

// refStack and altStack are the stack names a minimal stack and its other load under; a default
// made from the name (a namespace, a cluster name) is shown with <stack> in its place, and one
// made from more than the name (a hashed account name) differs between the two: derived.
const refStack, altStack = "STACK", "ALT"

// secrets are the secret keys every minimal stack sets: towers (on by default) need the ssh key
// seed, Jupyter (on by default) its password.
var secrets = map[string]string{
	"kolotoc:sshKeySeed":      "9f2c4e7a1b8d3f6052e9a7c1d4b8f3e6a0c5d9e2f7b1a4c8e3d6f9a2b5c7e1d4",
	"kolotoc:jupyterPassword": "reference-password-0123",
}

// A minimalStack sets only what its cloud cannot default, as the tests' smallest loading stacks
// do (stacks/keys_test.go, stacks/machines_test.go): the cloud, the cluster a cloud needs, the
// storage a cloud must be told, and two pools, a CPU pool first (the reference's pool settings
// are its defaults) and a GPU pool of two nodes (the two towers need one each). The reference's
// defaults are what stacks.Load fills in it.
//
// Its other is the same stack with other pools (other names, sizes and machine types, a node
// count set) under another stack name: a setting whose default differs between the two is
// derived from the pools or another setting, and the reference says so instead of showing one
// stack's figure as the default.
type minimalStack struct {
	Cloud         string
	Values        map[string]string // besides kolotoc:cloud and the secrets
	OtherPools    string            // kolotoc:nodePools of Other
	loaded, other *stacks.Config
}

// minimalStacks are in the order of the clouds in messages.
var minimalStacks = []*minimalStack{
	{Cloud: stacks.CloudSimulated,
		Values: map[string]string{
			"kolotoc:nodePools": `[{"name":"cpu"},{"name":"gpu","nodes":2,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100"}]`}},
	{Cloud: stacks.CloudExisting,
		Values: map[string]string{
			"kolotoc:cluster":   `{"kubeconfig":"kubeconfig"}`,
			"kolotoc:nodePools": `[{"name":"cpu"},{"name":"gpu","nodes":2,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100"}]`}},
	{Cloud: stacks.CloudGCP,
		Values: map[string]string{
			"kolotoc:cluster":   `{"region":"us-central1","zone":"us-central1-a"}`,
			"kolotoc:storage":   `{"type":"filestore"}`,
			"kolotoc:nodePools": `[{"name":"cpu","machineType":"n2-standard-16"},{"name":"gpu","nodes":2,"machineType":"a2-highgpu-8g"}]`},
		OtherPools: `[{"name":"cpub","nodes":3,"machineType":"n2-standard-32"},{"name":"gpub","nodes":2,"machineType":"a2-highgpu-4g"}]`},
	{Cloud: stacks.CloudAWS,
		Values: map[string]string{
			"kolotoc:cluster":   `{"region":"us-east-1"}`,
			"kolotoc:storage":   `{"type":"efs"}`,
			"kolotoc:nodePools": `[{"name":"cpu","machineType":"m6i.4xlarge"},{"name":"gpu","nodes":2,"machineType":"p4d.24xlarge"}]`},
		OtherPools: `[{"name":"cpub","nodes":3,"machineType":"m6i.8xlarge"},{"name":"gpub","nodes":2,"machineType":"g5.12xlarge"}]`},
	{Cloud: stacks.CloudAzure,
		Values: map[string]string{
			"kolotoc:cluster":   `{"region":"eastus"}`,
			"kolotoc:storage":   `{"type":"azurefiles"}`,
			"kolotoc:nodePools": `[{"name":"cpu","machineType":"Standard_D16s_v5"},{"name":"gpu","nodes":2,"machineType":"Standard_ND96asr_v4"}]`},
		OtherPools: `[{"name":"cpub","nodes":3,"machineType":"Standard_D32s_v5"},{"name":"gpub","nodes":2,"machineType":"Standard_NC64as_T4_v3"}]`},
}

// otherSimulatedPools are the other pools of the clouds without machine types: sizes given.
const otherSimulatedPools = `[{"name":"cpub","nodes":3,"cpus":16,"memory":"64Gi"},{"name":"gpub","nodes":2,"gpusPerNode":4,"gpuType":"nvidia-tesla-a100","cpus":64,"memory":"512Gi"}]`

func init() {
	for _, m := range minimalStacks {
		if m.OtherPools == "" {
			m.OtherPools = otherSimulatedPools
		}
	}
}

// raw is the minimal stack as Pulumi hands it to the program; with other, Other's.
func (m *minimalStack) raw(other bool) stacks.Raw {
	r := stacks.Raw{Project: "kolotoc", Stack: refStack, Values: map[string]string{"kolotoc:cloud": m.Cloud}, Secrets: map[string]bool{}}
	for k, v := range m.Values {
		r.Values[k] = v
	}
	if other {
		r.Stack, r.Values["kolotoc:nodePools"] = altStack, m.OtherPools
	}
	for k, v := range secrets {
		r.Values[k], r.Secrets[k] = v, true
	}
	return r
}

// load loads the stack and its other.
func (m *minimalStack) load() error {
	var err error
	if m.loaded, err = stacks.Load(m.raw(false)); err != nil {
		return fmt.Errorf("the minimal %s stack: %w", m.Cloud, err)
	}
	if m.other, err = stacks.Load(m.raw(true)); err != nil {
		return fmt.Errorf("the minimal %s stack with other pools: %w", m.Cloud, err)
	}
	return nil
}

// setPaths are the settings a stack's values give, as the reference writes their paths
// (cluster.region, nodePools[].name: a list's first element only, whose settings the reference
// shows).
func setPaths(r stacks.Raw) map[string]bool {
	out := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		out[path] = true
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			if len(v) > 0 {
				walk(path+"[]", v[0])
			}
		}
	}
	for full, text := range r.Values {
		key := strings.TrimPrefix(full, stacks.ConfigNamespace+":")
		var v any
		if json.Unmarshal([]byte(text), &v) != nil {
			v = text
		}
		walk(key, v)
	}
	return out
}

// MinimalSummary is each minimal stack's values, as the reference lists them.
func MinimalSummary() []string {
	var out []string
	for _, m := range minimalStacks {
		parts := []string{"`cloud: " + m.Cloud + "`"}
		for _, k := range []string{"kolotoc:cluster", "kolotoc:storage", "kolotoc:nodePools"} {
			if v, ok := m.Values[k]; ok {
				parts = append(parts, "`"+strings.TrimPrefix(k, "kolotoc:")+": "+v+"`")
			}
		}
		out = append(out, strings.Join(parts, ", "))
	}
	return out
}
