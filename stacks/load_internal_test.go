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
