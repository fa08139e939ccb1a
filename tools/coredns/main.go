// Command coredns is CoreDNS at the release pinned in go.mod with only the plugins the real envtest node
// needs: the kubernetes plugin answering cluster.local from the API server, forward for everything else,
// and the few that bind, log and report health. Leaving out the cloud back-ends (route53, azure, clouddns,
// ...) keeps the build to a fraction of the stock binary's on two cores.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order plugins run in, a subsequence of CoreDNS's own plugin.cfg order.
func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes", "forward"}
}

func main() {
	coremain.Run()
}
