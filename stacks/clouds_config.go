package stacks

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/meta"
)

// applyCloudDefaults runs first in applyDefaults: pool figures from the catalogue (so the generic
// 8-core default never hides a machine type's real size), the cloud's own keys (its entry's
// Defaults), how pools are replaced, and the file store's settings (its cloud's Store, once the
// cluster's network is defaulted). Like applyDefaults, it fills zero values only.
func (c *Config) applyCloudDefaults() {
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if m, ok := c.machineType(*p); ok {
			meta.Fill(&p.CPUs, m.VCPUs)
			meta.Fill(&p.Memory, m.Memory())
			meta.Fill(&p.GPUsPerNode, m.GPUs)
			meta.Fill(&p.GPUType, m.GPUType)
		}
	}
	if cl := c.CloudEntry(); cl.Defaults != nil {
		cl.Defaults(c)
	}
	c.applyRecoveryDefaults()
	if st := storeCloud(c.Storage.Type); st != nil && st.Store.Defaults != nil {
		st.Store.Defaults(c) // the cloud's file store (storage_cloud.go)
	}
}

// TowersPool is the pool the towers will run on, as applyDefaults will choose it.
func (c *Config) TowersPool() *NodePool {
	if c.Towers.Pool != "" {
		return c.Pool(c.Towers.Pool)
	}
	return c.firstPool(true)
}

// validateCloud checks the keys of the clouds: machine types against the catalogue, then each
// cloud's own keys (its entry's Check, on every stack: a key of one cloud is refused on another),
// the file store, who reaches the API server and how pools are replaced. It runs on every stack:
// a simulated stack that mirrors a cloud stack is checked against the same catalogue.
func (c *Config) validateCloud(v *Validator) {
	for i, p := range c.NodePools {
		c.validatePoolMachine(v, i, p)
	}
	for _, cl := range registeredClouds() {
		if cl.Check != nil {
			cl.Check(c, v)
		}
	}
	c.validateCloudStorage(v) // storage_cloud.go
	c.validateAccess(v)       // clouds_access.go
	c.validateRecovery(v)     // clouds_recovery.go
	c.validateBackup(v)       // storage_cloud.go
}

// validatePoolMachine checks a pool against its machine type in the catalogue. A machine type
// the catalogue does not know stands with the shape the stack gives it (checked before defaults
// by validateShapes, machines.go).
func (c *Config) validatePoolMachine(v *Validator, i int, p NodePool) {
	key := fmt.Sprintf("nodePools[%d]", i)
	if c.CloudEntry().Creates && p.MachineType == "" {
		v.add(key+".machineType", "(unset)", fmt.Sprintf("required with cloud %s; e.g. %s", c.Cloud, machineTypeHint(c.Cloud, "")))
		return
	}
	m, ok := c.machineType(p)
	if !ok {
		c.validateUncatalogued(v, key, p)
		return
	}
	cl := cloudNamed(m.Cloud)
	if m.Attach && cl.AttachedGPUs != nil {
		cl.AttachedGPUs(v, key, p, m)
	} else {
		if p.GPUsPerNode != m.GPUs {
			hint := ""
			if m.GPUs == 0 {
				hint = cl.NoGPUsHint
			}
			v.add(key+".gpusPerNode", strconv.Itoa(p.GPUsPerNode), fmt.Sprintf("machine type %s has %d GPUs; allowed: %d (or leave it unset)%s", m.Name, m.GPUs, m.GPUs, hint))
		}
		if m.GPUs > 0 && p.GPUType != m.GPUType {
			v.add(key+".gpuType", p.GPUType, fmt.Sprintf("machine type %s carries %s; allowed: %s (or leave it unset)", m.Name, m.GPUType, m.GPUType))
		}
	}
	if p.CPUs > m.VCPUs {
		v.add(key+".cpus", strconv.Itoa(p.CPUs), fmt.Sprintf("machine type %s has %d vCPUs; allowed: 1..%d", m.Name, m.VCPUs, m.VCPUs))
	}
	if q, err := resource.ParseQuantity(p.Memory); err == nil {
		if q.Cmp(resource.MustParse(m.Memory())) > 0 {
			v.add(key+".memory", p.Memory, fmt.Sprintf("machine type %s has %s; allowed: up to %s", m.Name, m.Memory(), m.Memory()))
		}
	}
}
