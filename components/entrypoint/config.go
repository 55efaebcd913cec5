package entrypoint

import (
	"slices"
	"strings"

	"kolotoc/components/meta"
)

// Key is the entrypoint's config key, kolotoc:entrypoint: the prefix of every problem Validate
// reports.
const Key = "entrypoint"

// Config is the entrypoint's config section, kolotoc:entrypoint, as the stack file says it: the
// YAML shape of the section, with each field's meaning and default. The stack fills the pool (the
// carriers') and the Dask image (the carriers' Dask), holds Jupyter's password and the TLS key
// (kolotoc:jupyterPassword, kolotoc:entrypointTLSKey: secrets of their own keys) and checks the
// whole against the node pools before the entrypoint is registered.
type Config struct {
	Jupyter          bool              `json:"jupyter"`          // run Jupyter (jupyterUI); default true
	TensorBoard      bool              `json:"tensorboard"`      // run TensorBoard on storage.mountPath/logs; default true
	DaskDashboard    bool              `json:"daskDashboard"`    // expose the Dask dashboard; default true
	ServiceType      string            `json:"serviceType"`      // ClusterIP | LoadBalancer; default ClusterIP
	SourceRanges     []string          `json:"sourceRanges"`     // CIDRs allowed to reach a LoadBalancer; required with LoadBalancer
	TLSCertificate   string            `json:"tlsCertificate"`   // PEM certificate (chain) Jupyter serves HTTPS with; key in kolotoc:entrypointTLSKey; required with LoadBalancer
	DaskImage        string            `json:"daskImage"`        // the Dask scheduler's image, pinned by tag; default the carriers' default image
	JupyterImage     string            `json:"jupyterImage"`     // Jupyter's image, pinned by tag; default DefaultJupyterImage
	TensorBoardImage string            `json:"tensorboardImage"` // TensorBoard's image, pinned by tag; default DefaultTensorBoardImage
	Pool             string            `json:"pool"`             // node pool name; default the carriers' pool
	JupyterUI        string            `json:"jupyterUI"`        // lab (JupyterLab) | notebook (classic Notebook 6); default lab
	Env              []meta.EnvSetting `json:"env"`              // environment of Jupyter (runs.go)

	// Requests of the entrypoint's containers as quantities; memory is also the limit.
	SchedulerCPU      string `json:"schedulerCpu"`      // dask-scheduler; default 500m
	SchedulerMemory   string `json:"schedulerMemory"`   // default 2Gi
	JupyterCPU        string `json:"jupyterCpu"`        // Jupyter; default 500m
	JupyterMemory     string `json:"jupyterMemory"`     // default 4Gi
	TensorBoardCPU    string `json:"tensorboardCpu"`    // TensorBoard; default 250m
	TensorBoardMemory string `json:"tensorboardMemory"` // default 2Gi
}

// Service types of kolotoc:entrypoint.serviceType (Args.ServiceType).
const (
	ServiceClusterIP    = "ClusterIP"    // reached from inside the cluster and by `kubectl port-forward`
	ServiceLoadBalancer = "LoadBalancer" // publishes Jupyter alone, over HTTPS, to entrypoint.sourceRanges
)

// ServiceTypes and UIs are the values kolotoc:entrypoint.serviceType and .jupyterUI allow, in the
// order their problems list them.
var (
	ServiceTypes = []string{ServiceClusterIP, ServiceLoadBalancer}
	UIs          = []string{UILab, UINotebook}
)

// Images when the section names none, each pinned by a tag that exists upstream (validation
// refuses tagless and :latest images). The Dask image follows the carriers' and the stack fills it.
const (
	DefaultJupyterImage     = "quay.io/jupyter/scipy-notebook:2024-10-07"
	DefaultTensorBoardImage = "tensorflow/tensorflow:2.17.0"
)

// Defaults that fill zero values. Each says its unit and why.
const (
	// Requests (cores, bytes) of the entrypoint's containers: the scheduler's bookkeeping,
	// Jupyter's kernels, TensorBoard's log reader.
	DefaultSchedulerCPU      = "500m"
	DefaultSchedulerMemory   = "2Gi"
	DefaultJupyterCPU        = "500m"
	DefaultJupyterMemory     = "4Gi"
	DefaultTensorBoardCPU    = "250m"
	DefaultTensorBoardMemory = "2Gi"
)

// NewConfig is the section before the stack file is read: Jupyter, TensorBoard and the Dask
// dashboard on, set before decoding since a stack's false is a zero value Default cannot tell
// from a key left out.
func NewConfig() Config {
	return Config{Jupyter: true, TensorBoard: true, DaskDashboard: true}
}

// Default fills the zero values the entrypoint decides alone: the Service type, the Jupyter and
// TensorBoard images, the Jupyter front end and the containers' requests. The pool and the Dask
// image are the carriers': the stack fills them. It fills zero values only, so applying it twice
// changes nothing.
func (e *Config) Default() {
	meta.Fill(&e.ServiceType, ServiceClusterIP)
	meta.Fill(&e.JupyterImage, DefaultJupyterImage)
	meta.Fill(&e.TensorBoardImage, DefaultTensorBoardImage)
	meta.Fill(&e.JupyterUI, UILab)
	meta.Fill(&e.SchedulerCPU, DefaultSchedulerCPU)
	meta.Fill(&e.SchedulerMemory, DefaultSchedulerMemory)
	meta.Fill(&e.JupyterCPU, DefaultJupyterCPU)
	meta.Fill(&e.JupyterMemory, DefaultJupyterMemory)
	meta.Fill(&e.TensorBoardCPU, DefaultTensorBoardCPU)
	meta.Fill(&e.TensorBoardMemory, DefaultTensorBoardMemory)
}

// Validate reports what is wrong with the entrypoint's own settings, with their full keys: the
// Service type and what a LoadBalancer needs of the section (source ranges, Jupyter on, a TLS
// certificate), and the Jupyter front end. What depends on the node pools (the pool, the
// containers' requests and their fit), on the stack (the images' pins, the source ranges' CIDR
// rules) and on other keys (the TLS key, kolotoc:entrypointTLSKey; Jupyter's password,
// kolotoc:jupyterPassword) the stack checks.
func (e Config) Validate(p meta.Problems) {
	if !slices.Contains(ServiceTypes, e.ServiceType) {
		p.Add(Key+".serviceType", meta.OrUnset(e.ServiceType), "allowed: "+strings.Join(ServiceTypes, ", "))
	}
	if e.ServiceType == ServiceLoadBalancer {
		if len(e.SourceRanges) == 0 {
			p.Add(Key+".sourceRanges", "[]", "required with a LoadBalancer: the CIDRs allowed in (e.g. your office's 203.0.113.0/24); "+
				"a LoadBalancer open to 0.0.0.0/0 puts JupyterLab on the internet")
		}
		if !e.Jupyter {
			p.Add(Key+".serviceType", e.ServiceType, "a LoadBalancer publishes Jupyter alone (over HTTPS), and entrypoint.jupyter is off; allowed: ClusterIP")
		}
		if e.TLSCertificate == "" {
			p.Add(Key+".tlsCertificate", "(unset)", "required with a LoadBalancer: Jupyter is published over HTTPS only; "+
				"set the PEM certificate here and its key with `pulumi config set --secret kolotoc:entrypointTLSKey < key.pem`")
		}
	}
	if !slices.Contains(UIs, e.JupyterUI) {
		p.Add(Key+".jupyterUI", meta.OrUnset(e.JupyterUI), "allowed: "+strings.Join(UIs, ", "))
	}
}
