package monitoring

import (
	"reflect"
	"testing"

	"kolotoc/components/meta/problemtest"
)

// report is what Validate reports of c, in its order.
func report(c Config) []string { return problemtest.Report(c.Validate) }

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

// TestConfigValidate: the defaulted section passes, as do Prometheus's other duration spellings;
// a scrape interval or retention that is no Prometheus duration (or is left out) is reported with
// its full key, the value and an example of what is allowed, the interval before the retention.
func TestConfigValidate(t *testing.T) {
	c := Config{Enabled: true}
	c.Default()
	if got := report(c); len(got) != 0 {
		t.Errorf("defaulted section reported %v", got)
	}

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"other durations", func(c *Config) { c.ScrapeInterval, c.Retention = "500ms", "1y2w" }, nil},
		{"compound duration", func(c *Config) { c.ScrapeInterval, c.Retention = "1m30s", "1h30m" }, nil},
		{"words", func(c *Config) { c.Retention = "two weeks" },
			[]string{"monitoring.retention=two weeks: not a Prometheus duration such as 30s, 15d or 1h30m"}},
		{"no unit", func(c *Config) { c.ScrapeInterval = "30" },
			[]string{"monitoring.scrapeInterval=30: not a Prometheus duration such as 30s, 15d or 1h30m"}},
		{"Go's fractions", func(c *Config) { c.ScrapeInterval = "1.5m" },
			[]string{"monitoring.scrapeInterval=1.5m: not a Prometheus duration such as 30s, 15d or 1h30m"}},
		{"both left out", func(c *Config) { c.ScrapeInterval, c.Retention = "", "" }, []string{
			"monitoring.scrapeInterval=(unset): not a Prometheus duration such as 30s, 15d or 1h30m",
			"monitoring.retention=(unset): not a Prometheus duration such as 30s, 15d or 1h30m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c
			tc.edit(&bad)
			if got := report(bad); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
		})
	}
}
