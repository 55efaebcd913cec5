package entrypoint

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/dask"
	"kolotoc/components/entrypoint"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/stacks"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The entrypoint (kolotoc:entrypoint): the scheduler node, with Jupyter, TensorBoard and the Dask
// dashboard (components/entrypoint). Every stack runs it and the others reach it; its outputs are
// the stack's own (StackOutputs), the Dask scheduler's allow with the other Dask allows (NetworkAllows).
var entry = &stacks.Workload{
	Key:    entrypoint.Key,
	Preset: func(c *stacks.Config) { c.Entrypoint = entrypoint.NewConfig() },
	// The scheduler runs the carriers' Dask on their pool.
	PoolDefaults: func(c *stacks.Config, _ meta.Pools) { meta.Fill(&c.Entrypoint.Pool, c.Carriers.Pool) },
	Defaults: func(c *stacks.Config) {
		meta.Fill(&c.Entrypoint.DaskImage, dask.DefaultImage)
		c.Entrypoint.Default() // components/entrypoint/config.go
	},
	Check: validateEntrypoint,
	Pools: func(c *stacks.Config) []stacks.PoolUse {
		return []stacks.PoolUse{{Pool: c.Entrypoint.Pool, Who: "the entrypoint"}}
	},
	Env: func(c *stacks.Config) []stacks.EnvSetting {
		return []stacks.EnvSetting{{Key: "entrypoint.env", Env: c.Entrypoint.Env}}
	},
	Secrets: []string{entrypoint.JupyterSecretName(entrypoint.Name), entrypoint.TLSSecretName(entrypoint.Name)},
	First:   true,
	Allows:  func(c *stacks.Config) []isolation.Allow { return entrypoint.Allows(Args(c)) }, // its UIs; Jupyter behind a LoadBalancer
	Deploy: func(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
		a := Args(c)
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

// Args is the entrypoint's configuration, less its site's namespace input and PodDeps
// and its secrets.
func Args(c *stacks.Config) *entrypoint.Args {
	return &entrypoint.Args{Config: c.Entrypoint, Site: stacks.WorkloadSite(c), Name: entrypoint.Name, LoadBalancer: publicLoadBalancer(c)}
}

// publicLoadBalancer is the load balancer the stack's cluster puts in front of a LoadBalancer
// Service: on aws the in-tree controller's (a Classic ELB unless told nlb), elsewhere one that
// passes client addresses through. An existing cluster is taken as the latter: on an existing
// EKS cluster jupyter-public would refuse every user (docs/operating/security.md, "The entrypoint from outside").
func publicLoadBalancer(c *stacks.Config) string {
	if lb := c.CloudEntry().LoadBalancer; lb != "" { // the cloud's (stacks/clouds/<name>)
		return lb
	}
	return entrypoint.LoadBalancerPassthrough
}

func validateEntrypoint(c *stacks.Config, v *stacks.Validator) {
	e := c.Entrypoint
	e.Validate(v) // the entrypoint's own settings (components/entrypoint/config.go)
	for i, r := range e.SourceRanges {
		v.CIDR(fmt.Sprintf("entrypoint.sourceRanges[%d]", i), r, "the networks your users come from, e.g. 203.0.113.0/24")
	}
	validateTLS(c, v)
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
			v.Add(ct.cpuKey, ct.cpu, "not a positive CPU quantity such as 500m or 2")
			valid = false
		}
		if errM != nil || m.Sign() <= 0 {
			v.Add(ct.memKey, ct.mem, "not a positive memory quantity such as 2Gi")
			valid = false
		}
		cpu.Add(q)
		mem.Add(m)
	}
	if pool != nil && valid {
		nodeMem, err := resource.ParseQuantity(pool.Memory)
		if cpu.MilliValue() > int64(pool.CPUs)*1000 || (err == nil && mem.Cmp(nodeMem) > 0) {
			v.Add("entrypoint.pool", e.Pool, fmt.Sprintf("the entrypoint's containers request %s CPU and %s together, more than a node of pool %q has (%d cores, %s); "+
				"lower entrypoint.*Cpu / *Memory or pick a larger pool", cpu.String(), mem.String(), pool.Name, pool.CPUs, pool.Memory))
		}
	}
}

// validateTLS checks entrypoint.tlsCertificate and kolotoc:entrypointTLSKey: both or neither, a
// PEM certificate and the PEM private key of its public key. Never prints the key.
func validateTLS(c *stacks.Config, v *stacks.Validator) {
	cert, key := c.Entrypoint.TLSCertificate, c.EntrypointTLSKey
	switch {
	case cert == "" && !key.IsSet():
		return
	case cert == "":
		v.Add("entrypoint.tlsCertificate", "(unset)", "required with kolotoc:entrypointTLSKey: the PEM certificate of that key")
		return
	case !key.IsSet():
		v.Add("entrypointTLSKey", "(unset)", "required with entrypoint.tlsCertificate: "+
			"`pulumi config set --secret kolotoc:entrypointTLSKey < key.pem`")
		return
	}
	if _, err := tls.X509KeyPair([]byte(cert), []byte(key.Reveal())); err != nil {
		// The error of X509KeyPair names what failed (no certificate, no key, mismatch), never
		// the key's bytes.
		v.Add("entrypoint.tlsCertificate", "[PEM]", "with kolotoc:entrypointTLSKey not a certificate and its key: "+
			strings.TrimPrefix(err.Error(), "tls: ")+"; allowed: a PEM certificate (chain) and the PEM private key of its first certificate")
	}
}
