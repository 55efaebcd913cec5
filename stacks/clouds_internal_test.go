package stacks

import (
	"strings"
	"testing"

	"kolotoc/components/cloud/eks"
)

func TestServiceAccountID(t *testing.T) {
	for name, want := range map[string]string{
		"kolotoc-prod":                       "kolotoc-prod-nodes",
		"kolotoc-" + strings.Repeat("x", 32): "kolotoc-xxxxxxxxxxxxxxxx-nodes",
		"kolotoc-research-a-very-long":       "kolotoc-research-a-very-nodes", // trailing hyphen trimmed
	} {
		if got := gkeServiceAccountID(name); got != want || len(got) > 30 {
			t.Errorf("gkeServiceAccountID(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestSubnets: the created VPC's subnets never overlap, for every zone count a region has.
func TestSubnets(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 6; i++ {
		for _, s := range []struct{ bits, index int }{{privateBits, i}, {publicBits, publicBase + i}} {
			cidr, err := eks.Subnet(defaultVPCCIDR, s.bits, s.index)
			if err != nil {
				t.Fatal(err)
			}
			seen[cidr] = true
		}
	}
	want := "10.0.0.0/20 10.0.16.0/20 10.0.80.0/20 10.0.240.0/24 10.0.245.0/24"
	for _, c := range strings.Fields(want) {
		if !seen[c] {
			t.Errorf("subnet %s not among %v", c, seen)
		}
	}
	if _, err := eks.Subnet("10.0.0.0/28", 8, 0); err == nil {
		t.Error("a /28 VPC split into /36s was accepted")
	}
}

// privateBits, publicBits, publicBase mirror the eks package's layout for TestSubnets.
const privateBits, publicBits, publicBase = 4, 8, 240
