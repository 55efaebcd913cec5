package stacks

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
)

func init() { Register(entrypointWorkload) } // in Config's order (workloads.go)

// The entrypoint (kolotoc:entrypoint): the scheduler node, with Jupyter, TensorBoard and the Dask
// dashboard (components/entrypoint). Every stack runs it and the others reach it; its outputs are
// the stack's own (StackOutputs), its allows beside the Dask scheduler's (NetworkAllows).
var entrypointWorkload = &Workload{
	Key:    entrypoint.Key,
	Preset: func(c *Config) { c.Entrypoint = entrypoint.NewConfig() },
	// The scheduler runs the carriers' Dask on their pool.
	PoolDefaults: func(c *Config, _ meta.Pools) { meta.Fill(&c.Entrypoint.Pool, c.Carriers.Pool) },
	Defaults: func(c *Config) {
		meta.Fill(&c.Entrypoint.DaskImage, dask.DefaultImage)
		c.Entrypoint.Default() // components/entrypoint/config.go
	},
	Check:   (*Config).validateEntrypoint,
	Pools:   func(c *Config) []PoolUse { return []PoolUse{{c.Entrypoint.Pool, "the entrypoint"}} },
	Env:     func(c *Config) []EnvSetting { return []EnvSetting{{"entrypoint.env", c.Entrypoint.Env}} },
	Secrets: []string{entrypoint.JupyterSecretName(entrypoint.Name), entrypoint.TLSSecretName(entrypoint.Name)},
	First:   true,
	Deploy: func(ctx *pulumi.Context, c *Config, w *Wiring) error {
		a := EntrypointArgs(c)
		a.Site = w.Site.WithPodDeps(w.Mount...)
		if c.Entrypoint.Jupyter {
			a.JupyterPassword = pulumi.ToSecret(pulumi.String(c.JupyterPassword.Reveal())).(pulumi.StringOutput)
		}
		if c.EntrypointTLSKey.IsSet() {
			a.TLSKey = pulumi.ToSecret(pulumi.String(c.EntrypointTLSKey.Reveal())).(pulumi.StringOutput)
		}
		entry, err := entrypoint.New(ctx, "entrypoint", a, w.Opts...)
		w.Entry, w.EntryArgs = entry, a
		return err
	},
}

// EntrypointArgs is the entrypoint's configuration, less its site's namespace input and PodDeps
// and its secrets.
func EntrypointArgs(c *Config) *entrypoint.Args {
	return &entrypoint.Args{Config: c.Entrypoint, Site: WorkloadSite(c), Name: entrypoint.Name, LoadBalancer: publicLoadBalancer(c)}
}

// publicLoadBalancer is the load balancer the stack's cluster puts in front of a LoadBalancer
// Service: on aws the in-tree controller's (a Classic ELB unless told nlb), elsewhere one that
// passes client addresses through. An existing cluster is taken as the latter: on an existing
// EKS cluster jupyter-public would refuse every user (docs/operating/security.md, "The entrypoint from outside").
func publicLoadBalancer(c *Config) string {
	if c.Cloud == CloudAWS {
		return entrypoint.LoadBalancerAWSInTree
	}
	return entrypoint.LoadBalancerPassthrough
}

func (c *Config) validateEntrypoint(v *Validator) {
	e := c.Entrypoint
	e.Validate(v) // the entrypoint's own settings (components/entrypoint/config.go)
	for i, r := range e.SourceRanges {
		v.CIDR(fmt.Sprintf("entrypoint.sourceRanges[%d]", i), r, "the networks your users come from, e.g. 203.0.113.0/24")
	}
	c.validateTLS(v)
	v.Image("entrypoint.daskImage", e.DaskImage)
	if e.Jupyter {
		v.Image("entrypoint.jupyterImage", e.JupyterImage)
	}
	if e.TensorBoard {
		v.Image("entrypoint.tensorboardImage", e.TensorBoardImage)
	}
	pool := v.Pool(c, "entrypoint.pool", e.Pool, false)
	// The pod's containers: the scheduler always, Jupyter and TensorBoard when enabled.
	containers := []struct {
		on             bool
		name           string
		cpu, mem       string
		cpuKey, memKey string
	}{
		{true, "dask-scheduler", e.SchedulerCPU, e.SchedulerMemory, "entrypoint.schedulerCpu", "entrypoint.schedulerMemory"},
		{e.Jupyter, "jupyter", e.JupyterCPU, e.JupyterMemory, "entrypoint.jupyterCpu", "entrypoint.jupyterMemory"},
		{e.TensorBoard, "tensorboard", e.TensorBoardCPU, e.TensorBoardMemory, "entrypoint.tensorboardCpu", "entrypoint.tensorboardMemory"},
	}
	var cpu, mem resource.Quantity
	valid := true
	for _, ct := range containers {
		if !ct.on {
			continue
		}
		q, errC := resource.ParseQuantity(ct.cpu)
		m, errM := resource.ParseQuantity(ct.mem)
		if errC != nil || q.Sign() <= 0 {
			v.add(ct.cpuKey, ct.cpu, "not a positive CPU quantity such as 500m or 2")
			valid = false
		}
		if errM != nil || m.Sign() <= 0 {
			v.add(ct.memKey, ct.mem, "not a positive memory quantity such as 2Gi")
			valid = false
		}
		cpu.Add(q)
		mem.Add(m)
	}
	if pool != nil && valid {
		nodeMem, err := resource.ParseQuantity(pool.Memory)
		if cpu.MilliValue() > int64(pool.CPUs)*1000 || (err == nil && mem.Cmp(nodeMem) > 0) {
			v.add("entrypoint.pool", e.Pool, fmt.Sprintf("the entrypoint's containers request %s CPU and %s together, more than a node of pool %q has (%d cores, %s); "+
				"lower entrypoint.*Cpu / *Memory or pick a larger pool", cpu.String(), mem.String(), pool.Name, pool.CPUs, pool.Memory))
		}
	}
}

// validateTLS checks entrypoint.tlsCertificate and kolotoc:entrypointTLSKey: both or neither, a
// PEM certificate and the PEM private key of its public key. Never prints the key.
func (c *Config) validateTLS(v *Validator) {
	cert, key := c.Entrypoint.TLSCertificate, c.EntrypointTLSKey
	switch {
	case cert == "" && !key.IsSet():
		return
	case cert == "":
		v.add("entrypoint.tlsCertificate", "(unset)", "required with kolotoc:entrypointTLSKey: the PEM certificate of that key")
		return
	case !key.IsSet():
		v.add("entrypointTLSKey", "(unset)", "required with entrypoint.tlsCertificate: "+
			"`pulumi config set --secret kolotoc:entrypointTLSKey < key.pem`")
		return
	}
	if _, err := tls.X509KeyPair([]byte(cert), []byte(key.Reveal())); err != nil {
		// The error of X509KeyPair names what failed (no certificate, no key, mismatch), never
		// the key's bytes.
		v.add("entrypoint.tlsCertificate", "[PEM]", "with kolotoc:entrypointTLSKey not a certificate and its key: "+
			strings.TrimPrefix(err.Error(), "tls: ")+"; allowed: a PEM certificate (chain) and the PEM private key of its first certificate")
	}
}
