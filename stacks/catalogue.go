package stacks

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// MachineType is what one cloud machine type offers: the figures validation checks a pool
// against and the simulated cloud gives a mirrored pool's nodes.
type MachineType struct {
	Name     string // as the cloud spells it: a2-highgpu-8g, p4d.24xlarge, Standard_ND96asr_v4
	Cloud    string // gcp | aws | azure
	GPUs     int    // NVIDIA GPUs per machine; 0 for a CPU machine
	GPUType  string // GPU type in the GCP accelerator vocabulary, used on every cloud (label nvidia.com/gpu.product)
	VCPUs    int    // logical cores
	MemoryMi int    // memory in MiB (GCP's "GB" and Azure's "GiB" are both 2^30 bytes; GCP's API rounds to whole MiB)
	// Attach: GPUs are attached to this CPU machine type rather than built in (GCP N1): a pool
	// names gpusPerNode and gpuType, within the limits of n1GPUs.
	Attach bool
	// EFAs (aws): the Elastic Fabric Adapters an instance takes, one per network card (AWS's
	// "Supported instance types" for EFA and each type's maximumEfaInterfaces); 0 = no EFA.
	EFAs int
	// EFARDMA (aws): the instance's EFA carries GPUDirect RDMA (P4d, P4de, P5), so NCCL is told
	// to use it (FI_EFA_USE_DEVICE_RDMA=1).
	EFARDMA bool
}

// Memory is the machine's memory as a Kubernetes quantity: whole GiB where it is, else MiB.
func (m MachineType) Memory() string {
	if m.MemoryMi%1024 == 0 {
		return fmt.Sprintf("%dGi", m.MemoryMi/1024)
	}
	return fmt.Sprintf("%dMi", m.MemoryMi)
}

// GPU types, named as GCP names its accelerators; the same names label the nodes of every cloud,
// so a workload that selects on nvidia.com/gpu.product moves between clouds unchanged.
const (
	GPUA100    = "nvidia-tesla-a100" // A100 40 GB
	GPUA100_80 = "nvidia-a100-80gb"  // A100 80 GB
	GPUH100_80 = "nvidia-h100-80gb"  // H100 80 GB
	GPUL4      = "nvidia-l4"         // L4 24 GB
	GPUA10G    = "nvidia-a10g"       // A10G 24 GB (AWS g5)
	GPUT4      = "nvidia-tesla-t4"   // T4 16 GB
	GPUV100    = "nvidia-tesla-v100" // V100 16 GB (GCP N1, AWS p3)
	GPUV100_32 = "nvidia-v100-32gb"  // V100 32 GB (AWS p3dn); GCP has none, so named as GCP names memory variants (nvidia-a100-80gb)
	GPUP100    = "nvidia-tesla-p100" // P100 16 GB (GCP N1)
	GPUP4      = "nvidia-tesla-p4"   // P4 8 GB (GCP N1)
)

// n1Limit is what GCP allows an N1 machine with some count of one attached GPU type: the vCPUs
// and memory (GB, that is GiB) of the largest N1 machine it attaches to.
type n1Limit struct{ vcpus, memGB int }

// n1GPUs are the GPUs GCP attaches to N1 machine types, by type and count, with the largest N1
// machine each count allows (GCP's "GPU machine types" page, N1 section). The P100 × 4 figures
// are those of most zones; a few (us-east1-c, europe-west1-b, europe-west1-d) allow only 64 vCPUs
// and 208 GB, which GCP reports when the pool is created.
var n1GPUs = map[string]map[int]n1Limit{
	GPUT4:   {1: {48, 312}, 2: {48, 312}, 4: {96, 624}},
	GPUV100: {1: {12, 78}, 2: {24, 156}, 4: {48, 312}, 8: {96, 624}},
	GPUP100: {1: {16, 104}, 2: {32, 208}, 4: {96, 624}},
	GPUP4:   {1: {24, 156}, 2: {48, 312}, 4: {96, 624}},
}

// noGPUs marks a CPU machine type in the catalogue.
const noGPUs = 0

// catalogue is every machine type Kolotoc knows, by cloud and name. Figures are the providers'
// published ones (checked against their machine-type tables); memory is total machine memory,
// of which Kubernetes allocates somewhat less.
var catalogue = buildCatalogue()

func buildCatalogue() map[string]map[string]MachineType {
	c := map[string]map[string]MachineType{CloudGCP: {}, CloudAWS: {}, CloudAzure: {}}
	add := func(cloud, name string, gpus int, gpuType string, vcpus, memGi int) {
		c[cloud][name] = MachineType{Name: name, Cloud: cloud, GPUs: gpus, GPUType: gpuType, VCPUs: vcpus, MemoryMi: memGi * 1024}
	}

	// GCP accelerator-optimized: A2 (A100 40 GB), A2 Ultra (A100 80 GB), A3 (H100), G2 (L4).
	for _, n := range []int{1, 2, 4, 8} {
		add(CloudGCP, fmt.Sprintf("a2-highgpu-%dg", n), n, GPUA100, 12*n, 85*n)
		add(CloudGCP, fmt.Sprintf("a2-ultragpu-%dg", n), n, GPUA100_80, 12*n, 170*n)
	}
	add(CloudGCP, "a2-megagpu-16g", 16, GPUA100, 96, 1360)
	add(CloudGCP, "a3-highgpu-8g", 8, GPUH100_80, 208, 1872)
	for _, g := range []struct{ vcpus, gpus int }{{4, 1}, {8, 1}, {12, 1}, {16, 1}, {24, 2}, {32, 1}, {48, 4}, {96, 8}} {
		add(CloudGCP, fmt.Sprintf("g2-standard-%d", g.vcpus), g.gpus, GPUL4, g.vcpus, 4*g.vcpus)
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
			add(CloudGCP, fmt.Sprintf("%s-%d", f.family, n), noGPUs, "", n, f.perCPU*n)
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
			c[CloudGCP][name] = MachineType{Name: name, Cloud: CloudGCP, GPUs: noGPUs, VCPUs: n,
				MemoryMi: int(math.Round(f.perCPUMi * float64(n))), Attach: true}
		}
	}

	// AWS GPU instances: P4d (A100 40 GB), P5 (H100), P3 (V100), G5 (A10G), G6 (L4).
	add(CloudAWS, "p4d.24xlarge", 8, GPUA100, 96, 1152)
	add(CloudAWS, "p4de.24xlarge", 8, GPUA100_80, 96, 1152)
	add(CloudAWS, "p5.48xlarge", 8, GPUH100_80, 192, 2048)
	// AWS P3 (V100): 16 GB GPUs, NVLink on the 8x and 16x sizes; p3dn with 32 GB GPUs.
	add(CloudAWS, "p3.2xlarge", 1, GPUV100, 8, 61)
	add(CloudAWS, "p3.8xlarge", 4, GPUV100, 32, 244)
	add(CloudAWS, "p3.16xlarge", 8, GPUV100, 64, 488)
	add(CloudAWS, "p3dn.24xlarge", 8, GPUV100_32, 96, 768)
	for _, s := range []struct {
		size        string
		vcpus, gpus int
	}{{"xlarge", 4, 1}, {"2xlarge", 8, 1}, {"4xlarge", 16, 1}, {"8xlarge", 32, 1}, {"12xlarge", 48, 4},
		{"16xlarge", 64, 1}, {"24xlarge", 96, 4}, {"48xlarge", 192, 8}} {
		add(CloudAWS, "g5."+s.size, s.gpus, GPUA10G, s.vcpus, 4*s.vcpus)
		add(CloudAWS, "g6."+s.size, s.gpus, GPUL4, s.vcpus, 4*s.vcpus)
	}
	// EFA: interfaces (network cards) per instance and GPUDirect RDMA, from AWS's EFA "Supported
	// instance types" and the instance types' network specifications. G5 and G6 take EFA from
	// the 8xlarge size up, one interface, without GPUDirect RDMA.
	for name, efa := range map[string]struct {
		n    int
		rdma bool
	}{
		"p4d.24xlarge": {4, true}, "p4de.24xlarge": {4, true}, "p5.48xlarge": {32, true}, "p3dn.24xlarge": {1, false},
		"g5.8xlarge": {1, false}, "g5.12xlarge": {1, false}, "g5.16xlarge": {1, false}, "g5.24xlarge": {1, false}, "g5.48xlarge": {1, false},
		"g6.8xlarge": {1, false}, "g6.12xlarge": {1, false}, "g6.16xlarge": {1, false}, "g6.24xlarge": {1, false}, "g6.48xlarge": {1, false},
	} {
		m := c[CloudAWS][name]
		m.EFAs, m.EFARDMA = efa.n, efa.rdma
		c[CloudAWS][name] = m
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
			add(CloudAWS, f.family+"."+s.size, noGPUs, "", s.vcpus, f.perCPU*s.vcpus)
		}
	}

	// Azure GPU VM sizes: NC A100 v4 (A100 80 GB PCIe), ND A100 v4 (A100 40 GB), NCas T4 v3.
	for _, g := range []struct{ vcpus, gpus int }{{24, 1}, {48, 2}, {96, 4}} {
		add(CloudAzure, fmt.Sprintf("Standard_NC%dads_A100_v4", g.vcpus), g.gpus, GPUA100_80, g.vcpus, 220*g.gpus)
	}
	add(CloudAzure, "Standard_ND96asr_v4", 8, GPUA100, 96, 900)
	for _, g := range []struct{ vcpus, gpus, mem int }{{4, 1, 28}, {8, 1, 56}, {16, 1, 110}, {64, 4, 440}} {
		add(CloudAzure, fmt.Sprintf("Standard_NC%das_T4_v3", g.vcpus), g.gpus, GPUT4, g.vcpus, g.mem)
	}
	// Azure general purpose (Dsv5, Dasv5: 4 GiB per vCPU), for CPU and system pools.
	for _, n := range []int{2, 4, 8, 16, 32, 48, 64, 96} {
		add(CloudAzure, fmt.Sprintf("Standard_D%ds_v5", n), noGPUs, "", n, 4*n)
		add(CloudAzure, fmt.Sprintf("Standard_D%das_v5", n), noGPUs, "", n, 4*n)
	}
	return c
}

// LookupMachineType returns a cloud's machine type by name.
func LookupMachineType(cloud, name string) (MachineType, bool) {
	m, ok := catalogue[cloud][name]
	return m, ok
}

// MachineTypes lists a cloud's catalogued machine types, sorted by name.
func MachineTypes(cloud string) []MachineType {
	out := make([]MachineType, 0, len(catalogue[cloud]))
	for _, m := range catalogue[cloud] {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// GPUMachineTypes names a cloud's catalogued GPU machine types, for error messages.
func GPUMachineTypes(cloud string) []string {
	var out []string
	for _, m := range MachineTypes(cloud) {
		if m.GPUs > 0 {
			out = append(out, m.Name)
		}
	}
	return out
}

// machineTypeHint lists the catalogued machine types closest to a misspelt one (same family
// prefix), or the cloud's GPU machine types when nothing is close.
func machineTypeHint(cloud, name string) string {
	prefix := name
	for _, sep := range []string{"-", ".", "_"} {
		if i := strings.Index(name, sep); i > 0 && i < len(prefix) {
			prefix = name[:i]
		}
	}
	var near []string
	for _, m := range MachineTypes(cloud) {
		if strings.HasPrefix(m.Name, prefix) {
			near = append(near, m.Name)
		}
	}
	if len(near) == 0 || len(near) > 24 {
		return "GPU machine types: " + strings.Join(GPUMachineTypes(cloud), ", ")
	}
	return strings.Join(near, ", ")
}

// catalogueCloud is the cloud whose catalogue describes a pool's machine type: the stack's cloud,
// or for a simulated stack the cloud that names that machine type (simulated stacks mirror
// cloud pools node for node).
func catalogueCloud(stackCloud, machineType string) (string, bool) {
	switch stackCloud {
	case CloudGCP, CloudAWS, CloudAzure:
		_, ok := catalogue[stackCloud][machineType]
		return stackCloud, ok
	}
	for _, cloud := range []string{CloudGCP, CloudAWS, CloudAzure} {
		if _, ok := catalogue[cloud][machineType]; ok {
			return cloud, true
		}
	}
	return "", false
}
