package monitoring

import (
	"reflect"
	"testing"
)

// TestConfigDefault: a section that says nothing but what the stack fills (the pool, whether the
// DCGM exporter runs) gets Grafana, Prometheus's interval, retention and data size, and the
// pinned images; a second Default changes nothing, nor does it touch what the stack file says.
func TestConfigDefault(t *testing.T) {
	off := false
	c := Config{Enabled: true, Pool: "cpu", DCGMExporter: &off} // the stack's
	c.Default()
	on := true
	want := Config{
		Enabled: true, Pool: "cpu", DCGMExporter: &off, Grafana: &on,
		ScrapeInterval: DefaultScrapeInterval, Retention: DefaultRetention, StorageSize: DefaultStorageSize,
		PrometheusImage: DefaultPrometheusImage, GrafanaImage: DefaultGrafanaImage, DCGMImage: DefaultDCGMExporterImage,
	}
	for _, after := range []string{"Default", "a second Default"} {
		if !reflect.DeepEqual(c, want) {
			t.Errorf("after %s:\n got %+v\nwant %+v", after, c, want)
		}
		c.Default() // fills zero values only: nothing is left to fill
	}

	set := Config{
		Grafana: &off, ScrapeInterval: "1m", Retention: "30d", StorageSize: "100Gi",
		PrometheusImage: "quay.io/prometheus/prometheus:v3.4.0", GrafanaImage: "grafana/grafana:11.3.0",
		DCGMImage: "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
	}
	kept := set
	kept.Default()
	if !reflect.DeepEqual(kept, set) {
		t.Errorf("Default overwrote what the stack file says: %+v became %+v", set, kept)
	}
	if kept.DCGMExporter != nil || kept.Pool != "" {
		t.Errorf("Default filled what the stack decides: pool %q, dcgmExporter %v", kept.Pool, kept.DCGMExporter)
	}
}
