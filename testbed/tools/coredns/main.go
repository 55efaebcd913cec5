// Command coredns is the local cluster's DNS: CoreDNS with only the plugins the test bed needs.
//
// It answers cluster names (Services, headless-Service pod names like tower-0.tower.<ns>.svc)
// from the API server and nothing else: there is no forward plugin, because pods of the local
// cluster reach nothing outside it. CoreDNS's own main links every plugin it ships (cloud DNS
// backends, etcd, grpc, ...); listing the few used here keeps the build small and fast.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins, in the order CoreDNS runs them (its plugin.cfg order, restricted to these).
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the plugin chain's order; a Corefile may use only these.
var directives = []string{"ready", "health", "errors", "log", "cache", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
