package storage

import (
	"strings"
	"testing"

	"kolotoc/components/meta"
	"kolotoc/components/meta/problemtest"
)

// TestConfigDefaultAndValidate: a section that says nothing gets the storage's defaults and
// passes; each bad setting is reported with its full key, the value and what is allowed.
func TestConfigDefaultAndValidate(t *testing.T) {
	c := Config{Type: TypeInClusterNFS}
	c.Default()
	if c.Size != defaultSize || c.MountPath != defaultMountPath || c.Image != DefaultServerImage ||
		c.Scratch.Type != ScratchEmptyDir || c.Scratch.SizeLimit != defaultScratchSizeLimit || c.Scratch.MountPath != defaultScratchMountPath {
		t.Errorf("defaults: %+v", c)
	}
	again := c
	again.Default()
	if again.Size != c.Size || again.Scratch != c.Scratch {
		t.Errorf("Default is not idempotent: %+v then %+v", c, again)
	}
	if got := problemtest.Report(c.Validate); len(got) != 0 {
		t.Errorf("defaulted config reported %v", got)
	}

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"protect an in-cluster server", func(c *Config) { c.Protect = true }, "storage.protect=true: storage.type in-cluster-nfs keeps its data"},
		{"nfs without a server", func(c *Config) { c.Type = TypeNFS }, "storage.server=(unset): required with storage.type nfs"},
		{"protect a node's directory", func(c *Config) { c.Type, c.Protect = TypeLocal, true }, "storage.protect=true: storage.type local is a directory of one node"},
		{"a server for local", func(c *Config) { c.Type, c.Server = TypeLocal, "10.0.0.2" }, "storage.server=10.0.0.2: only for storage.type nfs"},
		{"hostPath scratch without a path", func(c *Config) { c.Scratch.Type = ScratchHostPath }, "storage.scratch.path=(unset): required with scratch.type hostPath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c
			tc.edit(&bad)
			got := problemtest.Report(bad.Validate)
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("reported %q, want one problem starting %q", got, tc.want)
			}
		})
	}
}

// TestScratchSite: emptyDir scratch is sized and has no host path; hostPath scratch mounts the
// node's directory.
func TestScratchSite(t *testing.T) {
	empty := ScratchConfig{Type: ScratchEmptyDir, Path: "/mnt/ssd", SizeLimit: "50Gi", MountPath: "/scratch"}
	if got, want := empty.Site(), (meta.Scratch{SizeLimit: "50Gi", MountPath: "/scratch"}); got != want {
		t.Errorf("emptyDir: %+v, want %+v", got, want)
	}
	host := ScratchConfig{Type: ScratchHostPath, Path: "/mnt/ssd", SizeLimit: "50Gi", MountPath: "/scratch"}
	if got, want := host.Site(), (meta.Scratch{HostPath: "/mnt/ssd", SizeLimit: "50Gi", MountPath: "/scratch"}); got != want {
		t.Errorf("hostPath: %+v, want %+v", got, want)
	}
}
