package entrypoint

import "kolotoc/components/meta"

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
	DaskImage        string            `json:"daskImage"`        // default DefaultDaskImage
	JupyterImage     string            `json:"jupyterImage"`     // default DefaultJupyterImage
	TensorBoardImage string            `json:"tensorboardImage"` // default DefaultTensorBoardImage
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
