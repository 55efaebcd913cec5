package stacks

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// uncatalogued reports whether a pool of a cloud stack names a machine type that no catalogue
// knows: such a pool runs with the shape the stack gives it. A type another cloud's catalogue
// names is a mistake, not a custom type (otherCloud).
func (c *Config) uncatalogued(p NodePool) bool {
	if !c.CloudEntry().Creates || p.MachineType == "" {
		return false
	}
	_, ok := catalogueCloud("", p.MachineType)
	return !ok
}

// otherCloud is the cloud whose catalogue names a pool's machine type when that is not the
// stack's cloud ("" otherwise).
func (c *Config) otherCloud(p NodePool) string {
	if !c.CloudEntry().Creates {
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
