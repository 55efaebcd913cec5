package ring

import (
	"strings"
	"testing"

	"kolotoc/components/meta/problemtest"
)

// problems records what Validate reports, as key=value: msg.
type problems = problemtest.Recorder

// TestConfigDefaultAndValidate: a section that says nothing but its pool's GPUs gets the ring's
// defaults and passes; each bad setting is reported with its full key, the value and what is
// allowed.
func TestConfigDefaultAndValidate(t *testing.T) {
	c := NewConfig()
	c.GPUsPerTower = 8 // the stack's, from the pool
	c.Default()
	if c.Count != DefaultTowers || c.Slots != 8 || c.Image != DefaultImage || c.SSHPort != DefaultSSHPort ||
		strings.Join(c.Command, " ") != strings.Join(DefaultLauncherCommand, " ") || c.CPU == "" || c.LauncherMemory == "" {
		t.Errorf("defaults: %+v", c)
	}
	again := c
	again.Default()
	if again.Slots != c.Slots || again.Image != c.Image {
		t.Errorf("Default is not idempotent: %+v then %+v", c, again)
	}
	var none problems
	c.Validate(&none)
	if len(none) != 0 {
		t.Errorf("defaulted config reported %v", none)
	}
	cpu := NewConfig()
	cpu.Default()
	if cpu.Slots != DefaultCPUTowerSlots {
		t.Errorf("CPU towers get %d slots, want %d", cpu.Slots, DefaultCPUTowerSlots)
	}

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no towers", func(c *Config) { c.Count = 0 }, "towers.count=0: must be at least 1"},
		{"no slots", func(c *Config) { c.Slots = -1 }, "towers.slots=-1: must be at least 1"},
		{"port out of range", func(c *Config) { c.SSHPort = 70000 }, "towers.sshPort=70000: allowed: 1..65535"},
		{"empty argument", func(c *Config) { c.Command = []string{"mpirun", " "} }, `towers.command[1]=" ": empty argument`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c
			tc.edit(&bad)
			var got problems
			bad.Validate(&got)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("reported %q, want [%q]", got, tc.want)
			}
		})
	}
}
