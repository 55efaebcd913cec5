package stacks

import (
	"fmt"
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
	// names gpusPerNode and gpuType, within the limits its cloud's entry checks (Cloud.AttachedGPUs).
	Attach bool
	// EFAs (aws): the Elastic Fabric Adapters an instance takes, one per network card (AWS's
	// "Supported instance types" for EFA and each type's maximumEfaInterfaces); 0 = no EFA.
	EFAs int
	// EFARDMA (aws): the instance's EFA carries GPUDirect RDMA (P4d, P4de, P5, P5e, P5en, P6), so NCCL is told
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
	GPUH200    = "nvidia-h200-141gb" // H200 141 GB (GCP a3-ultragpu, AWS p5e and p5en)
	GPUB200    = "nvidia-b200"       // B200 (GCP a4-highgpu, AWS p6-b200)
	GPUL4      = "nvidia-l4"         // L4 24 GB
	GPUA10G    = "nvidia-a10g"       // A10G 24 GB (AWS g5)
	GPUT4      = "nvidia-tesla-t4"   // T4 16 GB
	GPUV100    = "nvidia-tesla-v100" // V100 16 GB (GCP N1, AWS p3)
	GPUV100_32 = "nvidia-v100-32gb"  // V100 32 GB (AWS p3dn); GCP has none, so named as GCP names memory variants (nvidia-a100-80gb)
	GPUP100    = "nvidia-tesla-p100" // P100 16 GB (GCP N1)
	GPUP4      = "nvidia-tesla-p4"   // P4 8 GB (GCP N1)
)

// NoGPUs marks a CPU machine type in a catalogue.
const NoGPUs = 0

// Catalogue is one cloud's machine types by name, as its entry declares them (Cloud.Catalogue).
// Figures are the providers' published ones (checked against their machine-type tables); memory
// is total machine memory, of which Kubernetes allocates somewhat less. RegisterCloud stamps
// each with its cloud.
type Catalogue map[string]MachineType

// Add adds a machine type whose memory is whole GiB.
func (c Catalogue) Add(name string, gpus int, gpuType string, vcpus, memGi int) {
	c[name] = MachineType{Name: name, GPUs: gpus, GPUType: gpuType, VCPUs: vcpus, MemoryMi: memGi * 1024}
}

// LookupMachineType returns a cloud's machine type by name.
func LookupMachineType(cloud, name string) (MachineType, bool) {
	cl := cloudNamed(cloud)
	if cl == nil {
		return MachineType{}, false
	}
	m, ok := cl.Catalogue[name]
	return m, ok
}

// MachineTypes lists a cloud's catalogued machine types, sorted by name.
func MachineTypes(cloud string) []MachineType {
	var catalogue Catalogue
	if cl := cloudNamed(cloud); cl != nil {
		catalogue = cl.Catalogue
	}
	out := make([]MachineType, 0, len(catalogue))
	for _, m := range catalogue {
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

// MachineTypeHint is machineTypeHint, for the entries' messages.
func MachineTypeHint(cloud, name string) string { return machineTypeHint(cloud, name) }

// catalogueCloud is the cloud whose catalogue describes a pool's machine type: the stack's cloud
// when it creates its cluster, or for a simulated (or existing) stack the first creating cloud
// that names that machine type (simulated stacks mirror cloud pools node for node).
func catalogueCloud(stackCloud, machineType string) (string, bool) {
	if cl := cloudNamed(stackCloud); cl != nil && cl.Creates {
		_, ok := cl.Catalogue[machineType]
		return stackCloud, ok
	}
	for _, cl := range registeredClouds() {
		if _, ok := cl.Catalogue[machineType]; ok && cl.Creates {
			return cl.Name, true
		}
	}
	return "", false
}

// machineType is a pool's machine type, from the catalogue of catalogueCloud.
func (c *Config) machineType(p NodePool) (MachineType, bool) {
	cloud, ok := catalogueCloud(c.Cloud, p.MachineType)
	if !ok {
		return MachineType{}, false
	}
	return LookupMachineType(cloud, p.MachineType)
}
