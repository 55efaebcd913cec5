package gcp

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"kolotoc/components/meta"
	"kolotoc/stacks"
)

// catalogue is GCP's machine types Kolotoc knows (stacks' catalogue.go says what the figures are).
func catalogue() stacks.Catalogue {
	c := stacks.Catalogue{}
	// GCP accelerator-optimized: A2 (A100 40 GB), A2 Ultra (A100 80 GB), A3 (H100), G2 (L4).
	for _, n := range []int{1, 2, 4, 8} {
		c.Add(fmt.Sprintf("a2-highgpu-%dg", n), n, stacks.GPUA100, 12*n, 85*n)
		c.Add(fmt.Sprintf("a2-ultragpu-%dg", n), n, stacks.GPUA100_80, 12*n, 170*n)
	}
	c.Add("a2-megagpu-16g", 16, stacks.GPUA100, 96, 1360)
	c.Add("a3-highgpu-8g", 8, stacks.GPUH100_80, 208, 1872)
	for _, g := range []struct{ vcpus, gpus int }{{4, 1}, {8, 1}, {12, 1}, {16, 1}, {24, 2}, {32, 1}, {48, 4}, {96, 8}} {
		c.Add(fmt.Sprintf("g2-standard-%d", g.vcpus), g.gpus, stacks.GPUL4, g.vcpus, 4*g.vcpus)
	}
	// GCP general purpose, for CPU pools: memory per vCPU is fixed within a family.
	for _, f := range []struct {
		family string
		perCPU int
		sizes  []int
	}{
		{"n2-standard", 4, []int{2, 4, 8, 16, 32, 48, 64, 80, 96, 128}},
		{"n2-highmem", 8, []int{2, 4, 8, 16, 32, 48, 64, 80, 96, 128}},
		{"n2d-standard", 4, []int{2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224}},
		{"e2-standard", 4, []int{2, 4, 8, 16, 32}},
		{"c2-standard", 4, []int{4, 8, 16, 30, 60}},
	} {
		for _, n := range f.sizes {
			c.Add(fmt.Sprintf("%s-%d", f.family, n), stacks.NoGPUs, "", n, f.perCPU*n)
		}
	}
	// GCP N1, the first generation: 3.75, 6.5 and 0.9 GB per vCPU, memory as GCP's API gives it
	// (whole MiB, rounded). The only general-purpose machines GCP attaches GPUs to (n1GPUs).
	for _, f := range []struct {
		family   string
		perCPUMi float64
		sizes    []int
	}{
		{"n1-standard", 3.75 * 1024, []int{1, 2, 4, 8, 16, 32, 64, 96}},
		{"n1-highmem", 6.5 * 1024, []int{2, 4, 8, 16, 32, 64, 96}},
		{"n1-highcpu", 0.9 * 1024, []int{2, 4, 8, 16, 32, 64, 96}},
	} {
		for _, n := range f.sizes {
			name := fmt.Sprintf("%s-%d", f.family, n)
			c[name] = stacks.MachineType{Name: name, GPUs: stacks.NoGPUs, VCPUs: n,
				MemoryMi: int(math.Round(f.perCPUMi * float64(n))), Attach: true}
		}
	}

	return c
}

// n1Limit is what GCP allows an N1 machine with some count of one attached GPU type: the vCPUs
// and memory (GB, that is GiB) of the largest N1 machine it attaches to.
type n1Limit struct{ vcpus, memGB int }

// n1GPUs are the GPUs GCP attaches to N1 machine types, by type and count, with the largest N1
// machine each count allows (GCP's "GPU machine types" page, N1 section). The P100 × 4 figures
// are those of most zones; a few (us-east1-c, europe-west1-b, europe-west1-d) allow only 64 vCPUs
// and 208 GB, which GCP reports when the pool is created.
var n1GPUs = map[string]map[int]n1Limit{
	stacks.GPUT4:   {1: {48, 312}, 2: {48, 312}, 4: {96, 624}},
	stacks.GPUV100: {1: {12, 78}, 2: {24, 156}, 4: {48, 312}, 8: {96, 624}},
	stacks.GPUP100: {1: {16, 104}, 2: {32, 208}, 4: {96, 624}},
	stacks.GPUP4:   {1: {24, 156}, 2: {48, 312}, 4: {96, 624}},
}

// validateAttachedGPUs checks the GPUs a pool attaches to a GCP N1 machine type against what GCP
// allows: the GPU types, their counts, and the largest machine each count may have.
func validateAttachedGPUs(v *stacks.Validator, key string, p stacks.NodePool, m stacks.MachineType) {
	types := meta.SortedKeys(n1GPUs)
	if p.GPUsPerNode == 0 {
		if p.GPUType != "" {
			if limits, ok := n1GPUs[p.GPUType]; ok {
				v.Add(key+".gpusPerNode", "0", fmt.Sprintf("required with gpuType %s: %s has no GPUs of its own and GCP attaches %s to it by count; allowed: %s",
					p.GPUType, m.Name, p.GPUType, joinInts(fitting(limits, m))))
			} else {
				v.Add(key+".gpuType", p.GPUType, fmt.Sprintf("%s has no GPUs of its own; GCP attaches to N1 machine types only: %s (with gpusPerNode)", m.Name, strings.Join(types, ", ")))
			}
		}
		return
	}
	limits, ok := n1GPUs[p.GPUType]
	if !ok {
		if p.GPUType != "" { // unset: validatePools asks for it
			v.Add(key+".gpuType", p.GPUType, fmt.Sprintf("GCP attaches to N1 machine types (%s) only: %s", m.Name, strings.Join(types, ", ")))
		}
		return
	}
	n := strconv.Itoa(p.GPUsPerNode)
	limit, ok := limits[p.GPUsPerNode]
	if !ok {
		v.Add(key+".gpusPerNode", n, fmt.Sprintf("GCP attaches %s to an N1 machine in counts of %s; allowed with %s: %s",
			p.GPUType, joinInts(sortedCounts(limits)), m.Name, joinInts(fitting(limits, m))))
		return
	}
	if m.VCPUs > limit.vcpus || m.MemoryMi > limit.memGB*1024 {
		// The largest count of every type admits the largest N1 machine, so fitting is never empty.
		v.Add(key+".gpusPerNode", n, fmt.Sprintf("GCP attaches %d × %s only to an N1 machine of at most %d vCPUs and %d GB, and %s has %d vCPUs and %s; allowed with %s: %s (or a smaller N1 machine type)",
			p.GPUsPerNode, p.GPUType, limit.vcpus, limit.memGB, m.Name, m.VCPUs, m.Memory(), m.Name, joinInts(fitting(limits, m))))
	}
}

// fitting lists the GPU counts whose limits admit machine m, ascending.
func fitting(limits map[int]n1Limit, m stacks.MachineType) []int {
	var out []int
	for _, n := range sortedCounts(limits) {
		if l := limits[n]; m.VCPUs <= l.vcpus && m.MemoryMi <= l.memGB*1024 {
			out = append(out, n)
		}
	}
	return out
}

func sortedCounts(limits map[int]n1Limit) []int {
	out := make([]int, 0, len(limits))
	for n := range limits {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
