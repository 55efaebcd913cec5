package stacks

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kolotoc/components/meta"
)

// uncatalogued reports whether a pool of a cloud stack names a machine type that no catalogue
// knows: such a pool runs with the shape the stack gives it. A type another cloud's catalogue
// names is a mistake, not a custom type (otherCloud).
func (c *Config) uncatalogued(p NodePool) bool {
	if !IsCloud(c.Cloud) || p.MachineType == "" {
		return false
	}
	_, ok := catalogueCloud("", p.MachineType)
	return !ok
}

// otherCloud is the cloud whose catalogue names a pool's machine type when that is not the
// stack's cloud ("" otherwise).
func (c *Config) otherCloud(p NodePool) string {
	if !IsCloud(c.Cloud) {
		return ""
	}
	if cloud, ok := catalogueCloud("", p.MachineType); ok && cloud != c.Cloud {
		if _, here := LookupMachineType(c.Cloud, p.MachineType); !here {
			return cloud
		}
	}
	return ""
}

// validateShapes runs on the stack's own values, before defaults: a pool of a machine type the
// catalogue does not know must say its cores and memory, since the generic 8-core, 32Gi default
// would describe a machine nobody checked (the capacity checks and the simulated mirror use them).
func (c *Config) validateShapes() []FieldError {
	v := &Validator{}
	for i, p := range c.NodePools {
		if !c.uncatalogued(p) {
			continue
		}
		var unset []string
		if p.CPUs == 0 {
			unset = append(unset, "cpus")
		}
		if p.Memory == "" {
			unset = append(unset, "memory")
		}
		if len(unset) == 0 {
			continue
		}
		key := fmt.Sprintf("nodePools[%d]", i)
		v.add(key+".machineType", p.MachineType, fmt.Sprintf(
			"not in Kolotoc's %s catalogue; give its shape with %s:%s.cpus, .memory (and .gpusPerNode, .gpuType for GPUs); unset here: %s; catalogued types near it: %s",
			c.Cloud, ConfigNamespace, key, strings.Join(unset, ", "), machineTypeHint(c.Cloud, p.MachineType)))
	}
	return v.errs
}

// validateUncatalogued checks the GPU half of a shape given for a machine type the catalogue does
// not know; its cores and memory were checked by validateShapes and validatePools.
func (c *Config) validateUncatalogued(v *Validator, key string, p NodePool) {
	if other := c.otherCloud(p); other != "" {
		v.add(key+".machineType", p.MachineType, fmt.Sprintf("a machine type of %s, not of %s; allowed on %s: %s (or another %s type with its shape in config)",
			other, c.Cloud, c.Cloud, machineTypeHint(c.Cloud, p.MachineType), c.Cloud))
		return
	}
	if !c.uncatalogued(p) {
		return // a simulated or existing pool of a machine type no cloud here names: its figures stand
	}
	if p.GPUType != "" && p.GPUsPerNode == 0 {
		v.add(key+".gpusPerNode", "0", fmt.Sprintf("required with gpuType %s: machine type %s is not in Kolotoc's %s catalogue, so its GPU count must be given; allowed: 1 or more (or remove gpuType for a CPU pool)",
			p.GPUType, p.MachineType, c.Cloud))
	}
	if p.GPUType != "" {
		for _, msg := range validation.IsValidLabelValue(p.GPUType) {
			v.add(key+".gpuType", p.GPUType, "labels the nodes (nvidia.com/gpu.product), so it must be a label value: "+msg+"; e.g. "+GPUV100)
		}
	}
}

// validateAttachedGPUs checks the GPUs a pool attaches to a GCP N1 machine type against what GCP
// allows: the GPU types, their counts, and the largest machine each count may have.
func validateAttachedGPUs(v *Validator, key string, p NodePool, m MachineType) {
	types := meta.SortedKeys(n1GPUs)
	if p.GPUsPerNode == 0 {
		if p.GPUType != "" {
			if limits, ok := n1GPUs[p.GPUType]; ok {
				v.add(key+".gpusPerNode", "0", fmt.Sprintf("required with gpuType %s: %s has no GPUs of its own and GCP attaches %s to it by count; allowed: %s",
					p.GPUType, m.Name, p.GPUType, joinInts(fitting(limits, m))))
			} else {
				v.add(key+".gpuType", p.GPUType, fmt.Sprintf("%s has no GPUs of its own; GCP attaches to N1 machine types only: %s (with gpusPerNode)", m.Name, strings.Join(types, ", ")))
			}
		}
		return
	}
	limits, ok := n1GPUs[p.GPUType]
	if !ok {
		if p.GPUType != "" { // unset: validatePools asks for it
			v.add(key+".gpuType", p.GPUType, fmt.Sprintf("GCP attaches to N1 machine types (%s) only: %s", m.Name, strings.Join(types, ", ")))
		}
		return
	}
	n := strconv.Itoa(p.GPUsPerNode)
	limit, ok := limits[p.GPUsPerNode]
	if !ok {
		v.add(key+".gpusPerNode", n, fmt.Sprintf("GCP attaches %s to an N1 machine in counts of %s; allowed with %s: %s",
			p.GPUType, joinInts(sortedCounts(limits)), m.Name, joinInts(fitting(limits, m))))
		return
	}
	if m.VCPUs > limit.vcpus || m.MemoryMi > limit.memGB*1024 {
		// The largest count of every type admits the largest N1 machine, so fitting is never empty.
		v.add(key+".gpusPerNode", n, fmt.Sprintf("GCP attaches %d × %s only to an N1 machine of at most %d vCPUs and %d GB, and %s has %d vCPUs and %s; allowed with %s: %s (or a smaller N1 machine type)",
			p.GPUsPerNode, p.GPUType, limit.vcpus, limit.memGB, m.Name, m.VCPUs, m.Memory(), m.Name, joinInts(fitting(limits, m))))
	}
}

// fitting lists the GPU counts whose limits admit machine m, ascending.
func fitting(limits map[int]n1Limit, m MachineType) []int {
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
