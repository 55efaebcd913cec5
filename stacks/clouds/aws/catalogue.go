package aws

import "kolotoc/stacks"

// catalogue is AWS's instance types Kolotoc knows (stacks' catalogue.go says what the figures
// are), with their EFA interfaces.
func catalogue() stacks.Catalogue {
	c := stacks.Catalogue{}
	// AWS GPU instances: P4d (A100 40 GB), P5 (H100), P5e and P5en (H200), P6 (B200), P3 (V100),
	// G5 (A10G), G6 (L4).
	c.Add("p4d.24xlarge", 8, stacks.GPUA100, 96, 1152)
	c.Add("p4de.24xlarge", 8, stacks.GPUA100_80, 96, 1152)
	c.Add("p5.48xlarge", 8, stacks.GPUH100_80, 192, 2048)
	c.Add("p5e.48xlarge", 8, stacks.GPUH200, 192, 2048)
	c.Add("p5en.48xlarge", 8, stacks.GPUH200, 192, 2048)
	c.Add("p6-b200.48xlarge", 8, stacks.GPUB200, 192, 2048)
	// AWS P3 (V100): 16 GB GPUs, NVLink on the 8x and 16x sizes; p3dn with 32 GB GPUs.
	c.Add("p3.2xlarge", 1, stacks.GPUV100, 8, 61)
	c.Add("p3.8xlarge", 4, stacks.GPUV100, 32, 244)
	c.Add("p3.16xlarge", 8, stacks.GPUV100, 64, 488)
	c.Add("p3dn.24xlarge", 8, stacks.GPUV100_32, 96, 768)
	for _, s := range []struct {
		size        string
		vcpus, gpus int
	}{{"xlarge", 4, 1}, {"2xlarge", 8, 1}, {"4xlarge", 16, 1}, {"8xlarge", 32, 1}, {"12xlarge", 48, 4},
		{"16xlarge", 64, 1}, {"24xlarge", 96, 4}, {"48xlarge", 192, 8}} {
		c.Add("g5."+s.size, s.gpus, stacks.GPUA10G, s.vcpus, 4*s.vcpus)
		c.Add("g6."+s.size, s.gpus, stacks.GPUL4, s.vcpus, 4*s.vcpus)
	}
	// EFA: interfaces (network cards) per instance and GPUDirect RDMA, from AWS's EFA "Supported
	// instance types" and the instance types' network specifications. G5 and G6 take EFA from
	// the 8xlarge size up, one interface, without GPUDirect RDMA. P5e has P5's 32 network cards,
	// P5en 16 and P6-B200 8 (EC2 User Guide, "Elastic network interfaces", Network cards: one EFA
	// per card), each with RDMA read and write (EFA "Supported instance types": Nitro v4, v5, v6).
	for name, efa := range map[string]struct {
		n    int
		rdma bool
	}{
		"p4d.24xlarge": {4, true}, "p4de.24xlarge": {4, true}, "p5.48xlarge": {32, true}, "p3dn.24xlarge": {1, false},
		"p5e.48xlarge": {32, true}, "p5en.48xlarge": {16, true}, "p6-b200.48xlarge": {8, true},
		"g5.8xlarge": {1, false}, "g5.12xlarge": {1, false}, "g5.16xlarge": {1, false}, "g5.24xlarge": {1, false}, "g5.48xlarge": {1, false},
		"g6.8xlarge": {1, false}, "g6.12xlarge": {1, false}, "g6.16xlarge": {1, false}, "g6.24xlarge": {1, false}, "g6.48xlarge": {1, false},
	} {
		m := c[name]
		m.EFAs, m.EFARDMA = efa.n, efa.rdma
		c[name] = m
	}
	// AWS general purpose and compute optimized, for CPU pools.
	awsSizes := []struct {
		size  string
		vcpus int
	}{{"large", 2}, {"xlarge", 4}, {"2xlarge", 8}, {"4xlarge", 16}, {"8xlarge", 32}, {"12xlarge", 48}, {"16xlarge", 64}, {"24xlarge", 96}}
	for _, f := range []struct {
		family string
		perCPU int
	}{{"m5", 4}, {"m6i", 4}, {"m7i", 4}, {"c5", 2}, {"c6i", 2}, {"r5", 8}, {"r6i", 8}} {
		for _, s := range awsSizes {
			if f.family == "c5" && (s.vcpus == 8*4 || s.vcpus == 64) {
				continue // c5 has 9xlarge/18xlarge instead of 8xlarge/16xlarge
			}
			c.Add(f.family+"."+s.size, stacks.NoGPUs, "", s.vcpus, f.perCPU*s.vcpus)
		}
	}

	return c
}
