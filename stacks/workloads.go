package stacks

import (
	"strings"

	"kolotoc/components/elastic"
	"kolotoc/components/etcd"
)

// The optional training workloads: etcd (rendezvous store), elastic PyTorch, a TensorFlow
// cluster, and monitoring. Each is off unless its key says enabled: true. This file holds their
// config types and defaults; workloads_validate.go checks them, workloads_deploy.go wires them.

// Etcd is the rendezvous store for elastic training (kolotoc:etcd): the section's type is the
// etcd package's own.
type Etcd = etcd.Config

// Elastic is elastic PyTorch training with torchrun (kolotoc:elastic): the section's type is the
// elastic package's own.
type Elastic = elastic.Config

// TFCluster is distributed TensorFlow with parameter servers (kolotoc:tfcluster).
type TFCluster struct {
	Enabled          bool     `json:"enabled"`          // deploy the cluster; default false
	Image            string   `json:"image"`            // image of every task; default DefaultTensorFlowImage
	Command          []string `json:"command"`          // program every task runs once TF_CONFIG is set; default the built-in check (needs a chief and a ps)
	Port             int      `json:"port"`             // gRPC port of every task; default 2222
	PS               TFRole   `json:"ps"`               // parameter servers; count default 1, CPU pool
	Workers          TFRole   `json:"workers"`          // workers; count default 2, at least 1, GPU pool
	Chief            TFRole   `json:"chief"`            // the chief (coordinator); count 0 or 1, default 1, CPU pool
	Evaluator        TFRole   `json:"evaluator"`        // the evaluator; count 0 or 1, default 1, CPU pool
	TensorBoard      *bool    `json:"tensorboard"`      // run the cluster's own TensorBoard when the entrypoint runs none; default true
	TensorBoardImage string   `json:"tensorboardImage"` // image of the cluster's own TensorBoard (when entrypoint.tensorboard is off); default DefaultTensorBoardImage
	OnSuccess        string   `json:"onSuccess"`        // keep | release: release scales every task to zero once the chief succeeds; default keep
	Env              []EnvVar `json:"env"`              // environment of every task (runs.go)
}

// TFRole is one TensorFlow task type (kolotoc:tfcluster.<role>).
type TFRole struct {
	Count  int    `json:"count"`  // tasks of this type; defaults per role (see TFCluster)
	Pool   string `json:"pool"`   // node pool name; default the first GPU pool for workers, the first CPU pool otherwise
	GPUs   int    `json:"gpus"`   // GPUs per task; default the pool's gpusPerNode for workers, 0 otherwise
	CPU    string `json:"cpu"`    // CPU request per task as a quantity; default 4 (workers), 2 (others)
	Memory string `json:"memory"` // memory request and limit per task as a quantity; default 16Gi (workers), 8Gi (others)
}

// Monitoring is Prometheus, Grafana and the DCGM exporter (kolotoc:monitoring).
type Monitoring struct {
	Enabled         bool   `json:"enabled"`         // deploy monitoring; default false
	Pool            string `json:"pool"`            // node pool of Prometheus and Grafana (a CPU pool); default entrypoint.pool
	DCGMExporter    *bool  `json:"dcgmExporter"`    // run the DCGM exporter on GPU nodes; default true when any pool has GPUs
	Grafana         *bool  `json:"grafana"`         // deploy Grafana (needs kolotoc:grafanaPassword); default true
	ScrapeInterval  string `json:"scrapeInterval"`  // Prometheus scrape interval as a duration; default 30s
	Retention       string `json:"retention"`       // Prometheus retention time as a duration; default 15d
	StorageSize     string `json:"storageSize"`     // Prometheus data (emptyDir) size limit as a quantity; default 20Gi
	PrometheusImage string `json:"prometheusImage"` // default DefaultPrometheusImage
	GrafanaImage    string `json:"grafanaImage"`    // default DefaultGrafanaImage
	DCGMImage       string `json:"dcgmImage"`       // default DefaultDCGMExporterImage
}

// Rendezvous backends for kolotoc:elastic.rdzvBackend: the elastic package's.
const (
	RdzvC10d   = elastic.BackendC10d   // worker 0 hosts the store; nothing else to run
	RdzvEtcdV2 = elastic.BackendEtcdV2 // the etcd component, v2 API
	RdzvEtcd   = elastic.BackendEtcd   // the etcd component, torchelastic's original backend (also v2)
)

// Images of the workloads. Each is pinned by a tag that exists upstream (see the report of
// issue 5 for where each was checked).
const (
	// LocalImageRegistry names the images the local test bed builds from Debian packages
	// (hack/images.sh); they exist only in the real node's containerd.
	LocalImageRegistry = "kolotoc.local"
	// DefaultEtcdImage is the store's (components/etcd): etcd 3.5, the last line with the v2 API.
	DefaultEtcdImage = etcd.DefaultImage
	// DefaultPyTorchImage is the elastic workers' (components/elastic): torchrun, no python-etcd.
	DefaultPyTorchImage      = elastic.DefaultImage
	DefaultTensorFlowImage   = "tensorflow/tensorflow:2.17.0-gpu"
	DefaultPrometheusImage   = "quay.io/prometheus/prometheus:v3.5.0"
	DefaultGrafanaImage      = "grafana/grafana:11.4.0"
	DefaultDCGMExporterImage = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04"
)

// Object names of the workloads (pods are <name>-<i>; validation checks the longest hostname).
const (
	EtcdName        = "etcd"
	ElasticName     = "elastic"
	TFPSName        = "tf-ps"
	TFWorkerName    = "tf-worker"
	TFChiefName     = "tf-chief"
	TFEvaluatorName = "tf-evaluator"
	TFScriptsName   = "tf-scripts"
	TFTensorBoard   = "tf-tensorboard"
)

// Defaults that fill zero values. Each says its unit and why.
const (
	// defaultTFPort: the gRPC port TensorFlow's own examples use.
	defaultTFPort = 2222
	// Task counts: one ps, two workers (the smallest cluster that exercises asynchronous
	// updates), one chief (the built-in program's coordinator), one evaluator.
	defaultTFPS        = 1
	defaultTFWorkers   = 2
	defaultTFChief     = 1
	defaultTFEvaluator = 1
	// defaultTFWorkerCPU, defaultTFWorkerMemory, defaultTFTaskCPU, defaultTFTaskMemory:
	// requests (cores, bytes) of a worker and of any other task.
	defaultTFWorkerCPU    = "4"
	defaultTFWorkerMemory = "16Gi"
	defaultTFTaskCPU      = "2"
	defaultTFTaskMemory   = "8Gi"
	// defaultScrapeInterval: Prometheus's own default; GPU power and temperature move slower.
	defaultScrapeInterval = "30s"
	// defaultRetention: two weeks of metrics, about the length of a long training run.
	defaultRetention = "15d"
	// defaultPrometheusStorage: size limit of Prometheus's emptyDir (quantity); two weeks of a
	// few hundred GPUs' DCGM series fit with room.
	defaultPrometheusStorage = "20Gi"
)

// presetWorkloads sets, before decoding, the defaults whose zero a stack may mean: 0 chiefs,
// evaluators or parameter servers leaves them out, and 0 workers must be reported rather than
// silently defaulted. Decoding keeps these unless the stack sets them. (The elastic workers'
// restarts, whose 0 is valid too, are preset by elastic.NewConfig.)
func presetWorkloads(c *Config) {
	c.TFCluster.PS.Count = defaultTFPS
	c.TFCluster.Workers.Count = defaultTFWorkers
	c.TFCluster.Chief.Count = defaultTFChief
	c.TFCluster.Evaluator.Count = defaultTFEvaluator
}

// applyWorkloadDefaults fills zero values only (idempotent). applyDefaults calls it last, when
// the pools and the entrypoint's defaults are settled.
func (c *Config) applyWorkloadDefaults() {
	cpuPool := func() string {
		if p := c.firstPool(false); p != nil {
			return p.Name
		}
		return ""
	}
	gpuPool := func() string {
		if p := c.firstPool(true); p != nil {
			return p.Name
		}
		return ""
	}
	setStr := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}

	setStr(&c.Etcd.Pool, cpuPool())
	c.Etcd.Default() // the rest is the store's own (components/etcd/config.go)

	el := &c.Elastic
	setStr(&el.Pool, gpuPool())
	if el.GPUsPerNode == 0 {
		if p := c.Pool(el.Pool); p != nil {
			el.GPUsPerNode = p.GPUsPerNode
		}
	}
	if c.Stack != "" {
		setStr(&el.RdzvID, "kolotoc-"+strings.ToLower(c.Stack))
	}
	el.Default() // the rest is the workers' own (components/elastic/config.go)

	tf := &c.TFCluster
	setStr(&tf.Image, DefaultTensorFlowImage)
	setStr(&tf.TensorBoardImage, DefaultTensorBoardImage)
	if tf.TensorBoard == nil {
		on := true
		tf.TensorBoard = &on
	}
	if tf.Port == 0 {
		tf.Port = defaultTFPort
	}
	setStr(&tf.Workers.Pool, gpuPool())
	if tf.Workers.GPUs == 0 {
		if p := c.Pool(tf.Workers.Pool); p != nil {
			tf.Workers.GPUs = p.GPUsPerNode
		}
	}
	setStr(&tf.Workers.CPU, defaultTFWorkerCPU)
	setStr(&tf.Workers.Memory, defaultTFWorkerMemory)
	for _, r := range []*TFRole{&tf.PS, &tf.Chief, &tf.Evaluator} {
		setStr(&r.Pool, cpuPool())
		setStr(&r.CPU, defaultTFTaskCPU)
		setStr(&r.Memory, defaultTFTaskMemory)
	}

	m := &c.Monitoring
	setStr(&m.Pool, c.Entrypoint.Pool)
	if m.DCGMExporter == nil {
		on := c.firstPool(true) != nil
		m.DCGMExporter = &on
	}
	if m.Grafana == nil {
		on := true
		m.Grafana = &on
	}
	setStr(&m.ScrapeInterval, defaultScrapeInterval)
	setStr(&m.Retention, defaultRetention)
	setStr(&m.StorageSize, defaultPrometheusStorage)
	setStr(&m.PrometheusImage, DefaultPrometheusImage)
	setStr(&m.GrafanaImage, DefaultGrafanaImage)
	setStr(&m.DCGMImage, DefaultDCGMExporterImage)
}

// tfOwnTensorBoard: the TensorFlow cluster runs its own TensorBoard, since the entrypoint runs
// none and tfcluster.tensorboard is not off.
func (c *Config) tfOwnTensorBoard() bool {
	return !c.Entrypoint.TensorBoard && (c.TFCluster.TensorBoard == nil || *c.TFCluster.TensorBoard)
}

// tfRoles lists the TensorFlow task types with their config keys, object names and types.
func (c *Config) tfRoles() []struct {
	Key, Name, Type string
	Role            *TFRole
} {
	tf := &c.TFCluster
	return []struct {
		Key, Name, Type string
		Role            *TFRole
	}{
		{"tfcluster.chief", TFChiefName, "chief", &tf.Chief},
		{"tfcluster.workers", TFWorkerName, "worker", &tf.Workers},
		{"tfcluster.ps", TFPSName, "ps", &tf.PS},
		{"tfcluster.evaluator", TFEvaluatorName, "evaluator", &tf.Evaluator},
	}
}
