package etcd

import (
	"testing"

	"kolotoc/components/meta/problemtest"
)

// problems records what Validate reports, as key=value: msg.
type problems = problemtest.Recorder

// TestConfigDefaultAndValidate: a section that says nothing but what the stack fills from the
// pools gets the store's defaults, a second Default changes nothing, and the result passes; each
// bad member count is reported with its full key, the value and what is allowed.
func TestConfigDefaultAndValidate(t *testing.T) {
	c := Config{Enabled: true, Pool: "cpu"} // the pool is the stack's
	c.Default()
	if c.Members != DefaultMembers || c.Image != DefaultImage || c.CPU == "" || c.Memory == "" || c.StorageSize == "" {
		t.Errorf("defaults: %+v", c)
	}
	again := c
	again.Default()
	if again != c {
		t.Errorf("Default is not idempotent: %+v then %+v", c, again)
	}
	set := Config{Members: 3, Image: "registry.k8s.io/etcd:3.5.16-0", CPU: "1", Memory: "2Gi", StorageSize: "1Gi"}
	kept := set
	kept.Default()
	if kept != set {
		t.Errorf("Default overwrote what the stack file says: %+v became %+v", set, kept)
	}
	var none problems
	c.Validate(&none)
	kept.Validate(&none)
	if len(none) != 0 {
		t.Errorf("1 and 3 members reported %v", none)
	}

	for _, tc := range []struct {
		name    string
		members int
		want    string
	}{
		{"no members", -1, "etcd.members=-1: allowed: 1, 3"},
		{"even count", 2, "etcd.members=2: an even count tolerates no more failures than 1 members and needs a larger quorum; allowed: 1, 3"},
		{"five members", 5, "etcd.members=5: allowed: 1, 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c
			bad.Members = tc.members
			var got problems
			bad.Validate(&got)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("reported %q, want [%q]", got, tc.want)
			}
		})
	}
}

// TestIs35: the 3.5 tags as quay.io and registry.k8s.io spell them, and nothing else: not 3.6,
// which dropped the v2 API, nor a 3.50 that only starts alike.
func TestIs35(t *testing.T) {
	for tag, want := range map[string]bool{
		"v3.5.17": true, "3.5.16-0": true, "v3.6.0": false, "3.4.27": false, "v3.50.0": false, "": false,
	} {
		if got := Is35(tag); got != want {
			t.Errorf("Is35(%q) = %v, want %v", tag, got, want)
		}
	}
}
