package stacks

import (
	"strings"

	"kolotoc/components/datain"
	"kolotoc/components/elastic"
	"kolotoc/components/etcd"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/components/tfcluster"
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

// TFCluster is distributed TensorFlow with parameter servers (kolotoc:tfcluster): the section's
// type is the tfcluster package's own.
type TFCluster = tfcluster.Config

// TFRole is one TensorFlow task type (kolotoc:tfcluster.<role>): the tfcluster package's.
type TFRole = tfcluster.Role

// Monitoring is Prometheus, Grafana and the DCGM exporter (kolotoc:monitoring): the section's
// type is the monitoring package's own.
type Monitoring = monitoring.Config

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
	DefaultPyTorchImage = elastic.DefaultImage
	// DefaultTensorFlowImage is the TensorFlow tasks' (components/tfcluster).
	DefaultTensorFlowImage = tfcluster.DefaultImage
	// DefaultPrometheusImage, DefaultGrafanaImage, DefaultDCGMExporterImage are the
	// monitoring's (components/monitoring).
	DefaultPrometheusImage   = monitoring.DefaultPrometheusImage
	DefaultGrafanaImage      = monitoring.DefaultGrafanaImage
	DefaultDCGMExporterImage = monitoring.DefaultDCGMExporterImage
)

// Object names of the workloads (pods are <name>-<i>; validation checks the longest hostname):
// each is its component's.
const (
	EtcdName        = etcd.Name
	ElasticName     = elastic.Name
	TFPSName        = tfcluster.NamePrefix + tfcluster.TypePS
	TFWorkerName    = tfcluster.NamePrefix + tfcluster.TypeWorker
	TFChiefName     = tfcluster.NamePrefix + tfcluster.TypeChief
	TFEvaluatorName = tfcluster.NamePrefix + tfcluster.TypeEvaluator
	TFScriptsName   = tfcluster.ScriptsName
	TFTensorBoard   = tfcluster.TensorBoardName
	DataInName      = datain.Component
)

// applyWorkloadDefaults fills zero values only (idempotent). applyDefaults calls it last, when
// the pools and the entrypoint's defaults are settled.
func (c *Config) applyWorkloadDefaults() {
	pools := c.pools()
	c.Etcd.DefaultPools(pools)
	c.Etcd.Default() // components/etcd/config.go

	el := &c.Elastic
	el.DefaultPools(pools)
	if c.Stack != "" {
		meta.Fill(&el.RdzvID, "kolotoc-"+strings.ToLower(c.Stack))
	}
	el.Default() // components/elastic/config.go

	tf := &c.TFCluster
	meta.Fill(&tf.TensorBoardImage, DefaultTensorBoardImage) // the entrypoint's
	tf.DefaultPools(pools)
	tf.Default() // components/tfcluster/config.go

	m := &c.Monitoring
	meta.Fill(&m.Pool, c.Entrypoint.Pool)
	m.DefaultPools(pools)
	m.Default() // components/monitoring/config.go
}

// tfOwnTensorBoard: the TensorFlow cluster runs its own TensorBoard, since the entrypoint runs
// none and tfcluster.tensorboard is not off.
func (c *Config) tfOwnTensorBoard() bool {
	return !c.Entrypoint.TensorBoard && (c.TFCluster.TensorBoard == nil || *c.TFCluster.TensorBoard)
}
