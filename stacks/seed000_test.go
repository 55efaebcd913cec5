package stacks_test

import (
	"errors"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"strings"
	"testing"
)

// The old cluster.sh user's own layout (`--num-towers 4 --num-carriers 1`, n1-standard-4 towers,
// no GPUs) with the towers' default request (4 CPU, 16Gi) does not fit a 4-core, 15 GiB node: the
// error says which keys to set and to what, and the stack with those values loads.
func TestOldClusterShLayout(t *testing.T) {
	raw := stacks.Raw{Project: "kolotoc", Stack: "old", Secrets: map[string]bool{"kolotoc:sshKeySeed": true, "kolotoc:jupyterPassword": true},
		Values: map[string]string{
			"kolotoc:cloud":           "gcp",
			"kolotoc:cluster":         `{"region":"us-central1","zone":"us-central1-a","project":"p"}`,
			"kolotoc:nodePools":       `[{"name":"towers","machineType":"n1-standard-4","nodes":4},{"name":"carriers","machineType":"n1-standard-4","nodes":1}]`,
			"kolotoc:storage":         `{"type":"filestore"}`,
			"kolotoc:towers":          `{"count":4,"pool":"towers"}`,
			"kolotoc:carriers":        `{"count":1,"pool":"carriers"}`,
			"kolotoc:sshKeySeed":      "9f2c4e7a1b8d3f6052e9a7c1d4b8f3e6a0c5d9e2f7b1a4c8e3d6f9a2b5c7e1d4",
			"kolotoc:jupyterPassword": "a-long-enough-password",
		}}
	_, err := stacks.Load(raw)
	var ce *stacks.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a ConfigError, got %v", err)
	}
	var msg string
	for _, fe := range ce.Errors {
		if fe.Key == "towers.count" {
			msg = fe.Msg
		}
	}
	for _, want := range []string{"kolotoc:towers.cpu", "kolotoc:towers.memory", `cpu: "3"`, "memory: 11Gi", "machineType"} {
		if !strings.Contains(msg, want) {
			t.Errorf("towers.count error %q does not say %q", msg, want)
		}
	}
	raw.Values["kolotoc:towers"] = `{"count":4,"pool":"towers","cpu":"3","memory":"11Gi"}`
	if _, err := stacks.Load(raw); err != nil {
		t.Errorf("the values the error suggests are refused: %v", err)
	}
}
