package stacks

import (
	"strings"
	"testing"
)

// TestPinsAndNodeDirsAccepted: image and nodeDir do not refuse the pins and directories they ask for.
func TestPinsAndNodeDirsAccepted(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for _, ref := range []string{"horovod/horovod:0.28.1", "registry.example.com:5000/team/mpi:v2",
		"ghcr.io/dask/dask@" + digest, "ghcr.io/dask/dask:2024.1@" + digest, "registry:5000/mpi@" + digest} {
		v := &Validator{}
		if v.Image("towers.image", ref); len(v.errs) > 0 {
			t.Errorf("%s refused: %v", ref, v.errs)
		}
	}
	for _, dir := range []string{"/mnt/disks/ssd0", "/var/lib/kolotoc/kolotoc-dev/shared", "/scratch", "/variable"} {
		v := &Validator{}
		if v.nodeDir("storage.scratch.path", dir); len(v.errs) > 0 {
			t.Errorf("%s refused: %v", dir, v.errs)
		}
	}
}

// TestCodeTransportsAccepted: authenticated transports on a cloud, git:// on the simulated one
// (the dev stack's demo repository) and anything pinned to a full commit.
func TestCodeTransportsAccepted(t *testing.T) {
	for _, tc := range []struct{ cloud, repo, ref string }{
		{CloudGCP, "https://github.com/team/train.git", "main"},
		{CloudAWS, "ssh://git@github.com/team/train.git", "main"},
		{CloudAzure, "git@github.com:team/train.git", "v1.2"},
		{CloudExisting, "git://git.example.com/train.git", "0123456789abcdef0123456789abcdef01234567"},
		{CloudSimulated, "git://10.213.0.1/demo.git", "main"},
	} {
		c := &Config{Cloud: tc.cloud, Code: Code{Repository: tc.repo, Ref: tc.ref}}
		v := &Validator{}
		if c.validateCodeTransport(v); len(v.errs) > 0 {
			t.Errorf("%s on %s refused: %v", tc.repo, tc.cloud, v.errs)
		}
	}
}
