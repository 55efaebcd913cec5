package stacks

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"kolotoc/components/meta"
	"kolotoc/components/ring"
)

// minPasswordLength is the shortest Jupyter password accepted (characters): anything shorter is
// guessable by a port-forwarded brute force in minutes.
const minPasswordLength = 12

var allowedEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// allowedClouds are the registered clouds' names, in order.
func allowedClouds() []string {
	var out []string
	for _, cl := range registeredClouds() {
		out = append(out, cl.Name)
	}
	return out
}

// Validate checks the defaulted configuration as a whole and returns every problem found.
func (c *Config) Validate() []FieldError {
	v := &Validator{}

	if c.Cloud == "" {
		v.add("cloud", "(unset)", "required; allowed: "+strings.Join(allowedClouds(), ", "))
	} else {
		v.oneOf("cloud", c.Cloud, allowedClouds())
	}
	v.dnsLabel("namespace", c.Namespace)
	v.dnsLabel("cluster.name", c.Cluster.Name)
	if c.CloudEntry().Creates && c.Cluster.Region == "" {
		v.add("cluster.region", "(unset)", "required with cloud "+c.Cloud)
	}

	c.validatePools(v)
	c.validateCloud(v)
	c.validateFabric(v)
	c.validateStorage(v)
	c.validateRunAsUser(v) // runas.go
	c.validateWorkloads(v) // each workload's checks, then their GPU pods together (workloads.go)
	c.validateQueue(v)     // queue.go
	c.validateIsolation(v)
	c.validateRuns(v)
	c.validateTimeouts(v)
	c.validateFit(v)
	c.validateRegistries(v)
	v.Image("devicePlugin.image", c.DevicePlugin.Image)
	c.validateGPUAgents(v) // gpuagents.go
	if c.Fabric.EFAPluginImage != "" {
		v.Image("fabric.efaPluginImage", c.Fabric.EFAPluginImage)
	}

	if c.Entrypoint.Jupyter {
		v.Password("jupyterPassword", c.JupyterPassword, "when entrypoint.jupyter is on (there is no default password)")
	}
	if c.Towers.Enabled && !c.SSHKeySeed.IsSet() {
		v.add("sshKeySeed", "(unset)", "required when towers are enabled (the towers' ssh keys derive from it); "+
			"run `pulumi config set --secret kolotoc:sshKeySeed \"$(openssl rand -hex 32)\"`")
	} else if _, err := ring.SeedBytes(c.SSHKeySeed.Reveal()); c.Towers.Enabled && err != nil {
		v.add("sshKeySeed", "[secret]", fmt.Sprintf("too weak: %v; allowed: %d random bytes or more, hex or base64; "+
			"run `pulumi config set --secret kolotoc:sshKeySeed \"$(openssl rand -hex 32)\"`", err, ring.MinSeedBytes))
	}
	return v.errs
}

func (c *Config) validatePools(v *Validator) {
	if len(c.NodePools) == 0 {
		v.add("nodePools", "[]", "at least one node pool is required")
	}
	seen := map[string]bool{}
	for i, p := range c.NodePools {
		k := fmt.Sprintf("nodePools[%d]", i)
		if v.dnsLabel(k+".name", p.Name) {
			if seen[p.Name] {
				v.add(k+".name", p.Name, "duplicate pool name; each pool needs its own name")
			}
			seen[p.Name] = true
		}
		meta.CheckDevices(v, k+".devices", p.Devices, ring.ManagedResources)
		c.validatePoolSize(v, k, p) // autoscale.go
		if p.GPUsPerNode < 0 {
			v.add(k+".gpusPerNode", strconv.Itoa(p.GPUsPerNode), "must be 0 (a CPU pool) or more")
		}
		if p.GPUsPerNode > 0 && p.GPUType == "" {
			v.add(k+".gpuType", "(unset)", "required when gpusPerNode > 0, e.g. nvidia-tesla-a100")
		}
		v.positive(k+".cpus", p.CPUs)
		v.Quantity(k+".memory", p.Memory)
		if p.Real {
			c.validateRealPool(v, k, p)
		}
		if p.LocalSSDs < 0 {
			v.add(k+".localSsds", strconv.Itoa(p.LocalSSDs), "must be 0 or more")
		}
		for lk, lv := range p.Labels {
			for _, msg := range validation.IsQualifiedName(lk) {
				v.add(k+".labels", lk, "invalid label key: "+msg)
			}
			for _, msg := range validation.IsValidLabelValue(lv) {
				v.add(fieldKey(k+".labels", lk), lv, "invalid label value: "+msg)
			}
		}
		for j, t := range p.Taints {
			tk := fmt.Sprintf("%s.taints[%d]", k, j)
			for _, msg := range validation.IsQualifiedName(t.Key) {
				v.add(tk+".key", t.Key, "invalid taint key: "+msg)
			}
			v.oneOf(tk+".effect", t.Effect, allowedEffects)
		}
	}
}

// validateRealPool checks a pool that is the local cluster's real node(s): only the simulated
// cloud has them, they carry no GPU, and no Node is registered for them, so Kolotoc cannot give
// them labels or taints.
func (c *Config) validateRealPool(v *Validator, k string, p NodePool) {
	if !c.CloudEntry().Local && c.Cloud != "" {
		v.add(k+".real", "true", fmt.Sprintf("a real pool is the local cluster's real node (label %s=%s), only with cloud %s; allowed on %s: false",
			meta.RealNodeLabel, meta.RealNodeValue, localCloud(), c.Cloud))
	}
	if p.GPUsPerNode != 0 {
		v.add(k+".gpusPerNode", strconv.Itoa(p.GPUsPerNode), "the local real node has no GPU (GPU shapes run on simulated pools); allowed with real: true: 0")
	}
	if len(p.Labels) > 0 {
		v.add(k+".labels", "(set)", "a real pool registers no Node, so its labels cannot be applied (workloads select "+
			meta.RealNodeLabel+"="+meta.RealNodeValue+"); remove them")
	}
	if len(p.Taints) > 0 {
		v.add(k+".taints", "(set)", "a real pool registers no Node, so its taints cannot be applied; remove them")
	}
}

type Validator struct{ errs []FieldError }

// Password checks a Password key: set (required when, says when) and long enough.
func (v *Validator) Password(key string, p Secret, when string) {
	switch {
	case !p.IsSet():
		v.add(key, "(unset)", "required "+when+"; run `pulumi config set --secret "+ConfigNamespace+":"+key+" <password>`")
	case len(p.Reveal()) < minPasswordLength:
		v.add(key, "[secret]", fmt.Sprintf("too short; at least %d characters", minPasswordLength))
	}
}

func (v *Validator) add(key, value, msg string) {
	v.errs = append(v.errs, FieldError{Key: key, Value: value, Msg: msg})
}

// Add is add for the components' own checks (meta.Problems).
func (v *Validator) Add(key, value, msg string) { v.add(key, value, msg) }

// OneOf checks that value is one of allowed (oneOf, for the entries).
func (v *Validator) OneOf(key, value string, allowed []string) { v.oneOf(key, value, allowed) }

func (v *Validator) oneOf(key, value string, allowed []string) {
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	if value == "" {
		value = "(unset)"
	}
	v.add(key, value, "allowed: "+strings.Join(allowed, ", "))
}

func (v *Validator) positive(key string, n int) {
	if n < 1 {
		v.add(key, strconv.Itoa(n), "must be at least 1")
	}
}

func (v *Validator) dnsLabel(key, value string) bool {
	if value == "" {
		v.add(key, "(unset)", "required: a DNS-1123 label (lower-case letters, digits, '-', at most 63 characters)")
		return false
	}
	if msgs := validation.IsDNS1123Label(value); len(msgs) > 0 {
		v.add(key, value, "not a DNS-1123 label: "+strings.Join(msgs, "; "))
		return false
	}
	return true
}

func (v *Validator) Quantity(key, value string) {
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() <= 0 {
		v.add(key, value, "not a positive Kubernetes quantity such as 16Gi or 500m")
	}
}

// systemDirs are the node's directories a hostPath must neither be, be inside, nor contain:
// the system's programs and configuration, the kernel's file systems, root's home, and the
// kubelet's and container runtimes' state (every pod's volumes and Secrets).
var systemDirs = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr",
	"/var/lib/containerd", "/var/lib/docker", "/var/lib/kubelet", "/var/run"}

// nodeDir refuses a hostPath directory that would hand a node's system to the pods mounting it:
// "/", a system directory, anything under one, or a directory holding one (/var, /var/lib).
func (v *Validator) nodeDir(key, dir string) {
	if !path.IsAbs(dir) {
		return // reported by absPath
	}
	dir = path.Clean(dir)
	for _, sys := range append([]string{"/"}, systemDirs...) {
		if dir == sys || strings.HasPrefix(dir, sys+"/") && sys != "/" || strings.HasPrefix(sys, dir+"/") {
			v.add(key, dir, fmt.Sprintf("a directory of the node's own system (%s): every pod mounting it could take the node over; "+
				"allowed: a directory apart from /, %s, e.g. /mnt/disks/ssd0", sys, strings.Join(systemDirs, ", ")))
			return
		}
	}
}

// host checks a server's address: an IP address or a lower-case DNS name, nothing more.
func (v *Validator) host(key, value, what string) {
	if net.ParseIP(value) != nil {
		return
	}
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		v.add(key, value, "not a DNS name or IP address; allowed: "+what)
	}
}

func (v *Validator) absPath(key, value string) {
	if !path.IsAbs(value) || path.Clean(value) != value {
		v.add(key, value, "must be a clean absolute path such as /shared")
	}
}

// imageDigest is the digest of a pinned image: sha256, the only algorithm registries serve.
var imageDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Image refuses tagless and :latest images: an unpinned Image makes two `pulumi up` of the same
// config run different code.
func (v *Validator) Image(key, ref string) {
	if ref == "" {
		v.add(key, "(unset)", "required: an image pinned by tag or digest")
		return
	}
	if name, digest, ok := strings.Cut(ref, "@"); ok {
		if name == "" || !imageDigest.MatchString(digest) {
			v.add(key, ref, "not a digest-pinned image; allowed: name@sha256: and 64 lower-case hexadecimal digits")
		}
		return
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	if !ok || tag == "" {
		v.add(key, ref, "image is not pinned; add a tag (name:1.2.3) or a digest (name@sha256:…)")
	} else if tag == "latest" {
		v.add(key, ref, "`:latest` is not pinned; use a version tag or a digest")
	}
}

// Pool checks that a referenced Pool exists and returns it.
func (v *Validator) Pool(c *Config, key, name string, gpu bool) *NodePool {
	if name == "" {
		kind := "CPU"
		if gpu {
			kind = "GPU"
		}
		v.add(key, "(unset)", "no "+kind+" pool declared in nodePools to default to; name one")
		return nil
	}
	p := c.Pool(name)
	if p == nil {
		names := make([]string, len(c.NodePools))
		for i, np := range c.NodePools {
			names[i] = np.Name
		}
		v.add(key, name, "pool not declared in nodePools; declared: "+strings.Join(names, ", "))
	}
	return p
}

// Fits checks that a pod's CPU and memory requests (keys <prefix>.cpu, <prefix>.memory) fit one
// node of the pool.
func (v *Validator) Fits(prefix string, p *NodePool, cpu, mem string) {
	v.FitsKeys(prefix+".cpu", prefix+".memory", p, cpu, mem)
}

// FitsKeys is fits with the keys of the CPU and memory requests named in full.
func (v *Validator) FitsKeys(cpuKey, memKey string, p *NodePool, cpu, mem string) {
	c, errC := resource.ParseQuantity(cpu)
	m, errM := resource.ParseQuantity(mem)
	if errC != nil || c.Sign() <= 0 {
		v.add(cpuKey, cpu, "not a positive CPU quantity such as 4 or 500m")
	}
	if errM != nil || m.Sign() <= 0 {
		v.add(memKey, mem, "not a positive memory quantity such as 16Gi")
	}
	nodeMem, err := resource.ParseQuantity(p.Memory)
	if errC == nil && c.MilliValue() > int64(p.CPUs)*1000 {
		v.add(cpuKey, cpu, fmt.Sprintf("more than a node of pool %q has (%d cores)", p.Name, p.CPUs))
	}
	if errM == nil && err == nil && m.Cmp(nodeMem) > 0 {
		v.add(memKey, mem, fmt.Sprintf("more than a node of pool %q has (%s)", p.Name, p.Memory))
	}
}

// Hostname checks the longest pod Hostname a StatefulSet generates and its FQDN in the hostfile.
func (v *Validator) Hostname(key, value, host, service, namespace string) {
	if msgs := validation.IsDNS1123Label(host); len(msgs) > 0 {
		v.add(key, value, fmt.Sprintf("pod hostname %q is not a DNS label: %s", host, strings.Join(msgs, "; ")))
	}
	fqdn := fmt.Sprintf("%s.%s.%s.svc", host, service, namespace)
	if len(fqdn) > validation.DNS1123SubdomainMaxLength {
		v.add(key, value, fmt.Sprintf("hostname %q is longer than %d characters", fqdn, validation.DNS1123SubdomainMaxLength))
	}
}
