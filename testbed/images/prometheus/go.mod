// Prometheus for the local real node (kolotoc:monitoring.prometheusImage), built from the upstream
// module at the cloud image's release (v3.5.0 is module v0.305.0): Debian's prometheus package is
// built without Kubernetes service discovery, which Kolotoc's scrape configuration uses. No web
// UI (its assets are not in the module); the HTTP API, scraping and the TSDB are all there.
module kolotoc.dev/hack/images/prometheus

go 1.24

require github.com/prometheus/prometheus v0.305.0
