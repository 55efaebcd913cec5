//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestMonitoringScrapesDaskForReal runs Kolotoc's Prometheus (kolotoc:monitoring, from the local
// image: Debian's Prometheus) beside the dev stack's Dask scheduler and carriers on the real node.
// Prometheus finds its targets the way it does on the clouds (kubernetes_sd_configs, through the
// API server's `kubernetes` Service with its own service account) and scrapes the scheduler and
// every worker process for real: every target is up, and the scheduler's metrics count the
// workers that joined. Grafana is not packaged by Debian: it is off here, and the queries of its
// GPU dashboard are parsed by this real Prometheus instead (they return no series: no GPU).
func TestMonitoringScrapesDaskForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 1100) // Prometheus 500m, its agent 100m, a carrier 200m, the scheduler 200m
	overrides := workloadOnly(t, "monitoring", map[string]any{
		"enabled": true, "grafana": false, "dcgmExporter": false, "pool": "node",
		"prometheusImage": localImage(t, "prometheus"), "scrapeInterval": "5s", "storageSize": "1Gi",
	})
	carriers, _ := configValue(t, "dev", "kolotoc:carriers").(map[string]any)
	overrides["carriers"] = carriers
	s := newStack(t, "e2e-monitoring", "dev", overrides)
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	flows := recordFlows(t, s)
	s.up()

	out := s.outputs()
	forward, _ := out["prometheusPortForward"].(string)
	local, _ := out["prometheusLocalUrl"].(string)
	if forward == "" || local == "" {
		t.Fatalf("outputs prometheusPortForward and prometheusLocalUrl missing: %v", out)
	}
	for k := range out {
		if strings.HasPrefix(k, "grafana") {
			t.Errorf("output %s with monitoring.grafana false", k)
		}
	}
	stop := s.background(t, forward)
	defer stop()
	api := strings.TrimSuffix(local, "/") + "/api/v1/"

	// Every worker process of every carrier: the scheduler's own count, and one scrape target each.
	processes := 0
	if n, ok := carriers["count"].(int); ok {
		processes = n
	}
	if n, ok := carriers["workersPerCarrier"].(int); ok {
		processes *= n
	}
	if processes == 0 {
		t.Fatalf("dev's carriers have no count or workersPerCarrier: %v", carriers)
	}

	var targets []promTarget
	waitFor(t, "Prometheus's dask targets up: the scheduler and every worker process", 4*time.Minute, func() (bool, string) {
		var got struct {
			ActiveTargets []promTarget `json:"activeTargets"`
		}
		if err := promGet(api+"targets?state=active", &got); err != nil {
			return false, err.Error()
		}
		targets = got.ActiveTargets
		var dask, down []string
		scheduler, workers := 0, 0
		for _, tg := range targets {
			if tg.Labels["job"] != "dask" {
				continue
			}
			dask = append(dask, tg.String())
			if tg.Health != "up" {
				down = append(down, tg.String())
			}
			switch tg.Labels["component"] {
			case "entrypoint":
				scheduler++
			case "carrier":
				workers++
			}
		}
		if len(down) > 0 || scheduler != 1 || workers != processes {
			return false, fmt.Sprintf("dask targets %v (want the scheduler and %d worker processes, all up); down: %v", dask, processes, down)
		}
		return true, ""
	})
	for _, tg := range targets {
		t.Logf("target %s", tg)
	}

	t.Run("the scheduler's metrics count every worker", func(t *testing.T) {
		waitFor(t, `dask_scheduler_workers{state="connected"} = `+fmt.Sprint(processes), 2*time.Minute, func() (bool, string) {
			v, err := promQuery(api, `dask_scheduler_workers{state="connected"}`)
			if err != nil {
				return false, err.Error()
			}
			return len(v) == 1 && v[0] == fmt.Sprint(processes), fmt.Sprint(`dask_scheduler_workers{state="connected"} = `, v)
		})
	})

	t.Run("the GPU dashboard's queries parse in the real Prometheus", func(t *testing.T) {
		exprs := dashboardExprs(t)
		if len(exprs) == 0 {
			t.Fatal("no query in the rendered GPU dashboard")
		}
		for _, e := range exprs {
			if _, err := promQuery(api, e); err != nil {
				t.Errorf("dashboard query %q: %v", e, err)
			}
		}
		// And the check can fail: Prometheus refuses a query that does not parse.
		if _, err := promQuery(api, `sum(DCGM_FI_DEV_GPU_UTIL by (node)`); err == nil {
			t.Error("Prometheus accepted a query missing its parenthesis")
		}
		t.Logf("%d dashboard queries parsed and ran", len(exprs))
	})

	t.Run("the NetworkPolicies admit Prometheus's scrapes, and refuse what Kolotoc forbids", func(t *testing.T) {
		s := s.sub(t)
		prom := podEnd(t, s, ns, s.podName(t, ns, "prometheus"))
		entry, carrier := podEnd(t, s, ns, s.podName(t, ns, "entrypoint")), podEnd(t, s, ns, "carrier-0")
		checkFlows(t, s, flows, missingAllow{"prometheus-scrape", "prometheus", "entrypoint"}, []flow{
			{From: carrier, To: entry, Port: entry.port(t, "dashboard")},             // only Prometheus scrapes
			{From: elsewhere(prom), To: carrier, Port: carrier.port(t, "dask-dash")}, // nor from another namespace
		})
	})
}

// promTarget is one of Prometheus's active targets.
type promTarget struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

func (p promTarget) String() string {
	s := fmt.Sprintf("%s %s/%s %s %s", p.Labels["job"], p.Labels["component"], p.Labels["pod"], p.ScrapeURL, p.Health)
	if p.LastError != "" {
		s += " (" + p.LastError + ")"
	}
	return s
}

// promGet reads a Prometheus API answer's data into v.
func promGet(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var envelope struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &envelope); err != nil {
		return fmt.Errorf("%s: status %d: %s", u, resp.StatusCode, tail(string(b)))
	}
	if envelope.Status != "success" {
		return errors.New(envelope.Error)
	}
	return json.Unmarshal(envelope.Data, v)
}

// promQuery runs an instant query and returns the values of its series.
func promQuery(api, expr string) ([]string, error) {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := promGet(api+"query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range data.Result {
		out = append(out, fmt.Sprint(r.Value[1]))
	}
	return out, nil
}

// dashboardExprs are the queries of the GPU dashboard as Kolotoc renders it, read from the
// workloads example's golden file (which the unit tests keep identical to the rendering).
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "tests", "testdata", "workloads.golden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	for {
		var doc struct {
			Name   string `yaml:"name"`
			Inputs struct {
				Data map[string]string `yaml:"data"`
			} `yaml:"inputs"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc.Name != "monitoring-grafana-dashboards" {
			continue
		}
		var dash struct {
			Panels []struct {
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal([]byte(doc.Inputs.Data["gpus.json"]), &dash); err != nil {
			t.Fatal(err)
		}
		var exprs []string
		for _, p := range dash.Panels {
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
		return slices.Compact(slices.Sorted(slices.Values(exprs)))
	}
	t.Fatal("no monitoring-grafana-dashboards in the workloads golden file")
	return nil
}
