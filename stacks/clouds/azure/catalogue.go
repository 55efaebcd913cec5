package azure

import (
	"fmt"

	"kolotoc/stacks"
)

// catalogue is Azure's VM sizes Kolotoc knows (stacks' catalogue.go says what the figures are).
func catalogue() stacks.Catalogue {
	c := stacks.Catalogue{}
	// Azure GPU VM sizes: NC A100 v4 (A100 80 GB PCIe), ND A100 v4 (A100 40 GB), NCas T4 v3.
	for _, g := range []struct{ vcpus, gpus int }{{24, 1}, {48, 2}, {96, 4}} {
		c.Add(fmt.Sprintf("Standard_NC%dads_A100_v4", g.vcpus), g.gpus, stacks.GPUA100_80, g.vcpus, 220*g.gpus)
	}
	c.Add("Standard_ND96asr_v4", 8, stacks.GPUA100, 96, 900)
	for _, g := range []struct{ vcpus, gpus, mem int }{{4, 1, 28}, {8, 1, 56}, {16, 1, 110}, {64, 4, 440}} {
		c.Add(fmt.Sprintf("Standard_NC%das_T4_v3", g.vcpus), g.gpus, stacks.GPUT4, g.vcpus, g.mem)
	}
	// Azure general purpose (Dsv5, Dasv5: 4 GiB per vCPU), for CPU and system pools.
	for _, n := range []int{2, 4, 8, 16, 32, 48, 64, 96} {
		c.Add(fmt.Sprintf("Standard_D%ds_v5", n), stacks.NoGPUs, "", n, 4*n)
		c.Add(fmt.Sprintf("Standard_D%das_v5", n), stacks.NoGPUs, "", n, 4*n)
	}
	return c
}
