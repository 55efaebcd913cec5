package monitoring

import (
	"regexp"

	"kolotoc/components/meta"
)

// Key is the monitoring's config key, kolotoc:monitoring: the prefix of every problem Validate
// reports.
const Key = "monitoring"

// Config is the monitoring's config section, kolotoc:monitoring, as the stack file says it: the
// YAML shape of the section, with each field's meaning and default. The stack fills the pool (the
// entrypoint's) and whether the DCGM exporter runs (whether any pool has GPUs), holds Grafana's
// admin password (kolotoc:grafanaPassword, a secret of its own key) and checks the whole against
// the node pools before the monitoring is registered.
type Config struct {
	Enabled         bool   `json:"enabled"`         // deploy monitoring; default false
	Pool            string `json:"pool"`            // node pool of Prometheus and Grafana (a CPU pool); default entrypoint.pool
	DCGMExporter    *bool  `json:"dcgmExporter"`    // run the DCGM exporter on GPU nodes; default true when any pool has GPUs
	Grafana         *bool  `json:"grafana"`         // deploy Grafana (needs kolotoc:grafanaPassword); default true
	ScrapeInterval  string `json:"scrapeInterval"`  // Prometheus scrape interval as a duration; default 30s
	Retention       string `json:"retention"`       // Prometheus retention time as a duration; default 15d
	StorageSize     string `json:"storageSize"`     // Prometheus data (emptyDir) size limit as a quantity; default 20Gi
	PrometheusImage string `json:"prometheusImage"` // Prometheus's image, pinned by tag; default DefaultPrometheusImage
	GrafanaImage    string `json:"grafanaImage"`    // Grafana's image, pinned by tag; default DefaultGrafanaImage
	DCGMImage       string `json:"dcgmImage"`       // the DCGM exporter's image, pinned by tag; default DefaultDCGMExporterImage
}

// Images when the section names none, each pinned by a tag that exists upstream (validation
// refuses tagless and :latest images).
const (
	DefaultPrometheusImage   = "quay.io/prometheus/prometheus:v3.5.0"
	DefaultGrafanaImage      = "grafana/grafana:11.4.0"
	DefaultDCGMExporterImage = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04"
)

// Defaults that fill zero values. Each says its unit and why.
const (
	// DefaultScrapeInterval: Prometheus's own default (a duration); GPU power and temperature
	// move slower.
	DefaultScrapeInterval = "30s"
	// DefaultRetention: two weeks of metrics (a duration), about the length of a long training
	// run.
	DefaultRetention = "15d"
	// DefaultStorageSize: size limit of Prometheus's emptyDir (quantity); two weeks of a few
	// hundred GPUs' DCGM series fit with room.
	DefaultStorageSize = "20Gi"
)

// DefaultPools fills what the monitoring takes from the stack's node pools: the DCGM exporter
// runs when there is a GPU pool.
func (m *Config) DefaultPools(p meta.Pools) { meta.FillPtr(&m.DCGMExporter, p.First(true) != "") }

// Default fills the zero values the monitoring decides alone: Grafana on, Prometheus's scrape
// interval, retention and data size, and the images. The pool is the entrypoint's, which the
// stack fills; DefaultPools decides whether the DCGM exporter runs. It fills zero values
// only, so applying it twice changes nothing.
func (m *Config) Default() {
	meta.FillPtr(&m.Grafana, true)
	meta.Fill(&m.ScrapeInterval, DefaultScrapeInterval)
	meta.Fill(&m.Retention, DefaultRetention)
	meta.Fill(&m.StorageSize, DefaultStorageSize)
	meta.Fill(&m.PrometheusImage, DefaultPrometheusImage)
	meta.Fill(&m.GrafanaImage, DefaultGrafanaImage)
	meta.Fill(&m.DCGMImage, DefaultDCGMExporterImage)
}

// GrafanaOn reports whether Grafana runs: monitoring.grafana, on unless set false.
func (m Config) GrafanaOn() bool { return m.Grafana == nil || *m.Grafana }

// DCGMOn reports whether the DCGM exporter runs: monitoring.dcgmExporter, whose default the
// stack sets from its node pools (off when unset).
func (m Config) DCGMOn() bool { return m.DCGMExporter != nil && *m.DCGMExporter }

// promDuration is a Prometheus duration such as 30s, 15d or 1h30m.
var promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

// Validate reports what is wrong with the monitoring's own settings, with their full keys:
// Prometheus's scrape interval and retention. What depends on the node pools (the pool), on the
// stack (the images' pins, the data size's quantity syntax) and on another key (Grafana's
// password, kolotoc:grafanaPassword) the stack checks.
func (m Config) Validate(p meta.Problems) {
	for _, d := range []struct{ key, value string }{
		{Key + ".scrapeInterval", m.ScrapeInterval},
		{Key + ".retention", m.Retention},
	} {
		if !promDuration.MatchString(d.value) {
			shown := d.value
			if shown == "" {
				shown = "(unset)" // as every problem shows a value the stack file leaves out
			}
			p.Add(d.key, shown, "not a Prometheus duration such as 30s, 15d or 1h30m")
		}
	}
}
