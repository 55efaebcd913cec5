package stacks

import (
	"fmt"
	"strconv"
	"strings"

	"kolotoc/components/ring"
)

// Host-network towers (towers.hostNetwork): each tower's sshd binds its port on the node's own
// address, where no NetworkPolicy applies, and the pod sees what the node sees (on GKE the
// node's metadata server, and so the node's service account rather than Workload Identity).
// Kolotoc refuses what would make that worse or never schedule: a Dask sentinel beside each
// tower (its worker and nanny ports run any code sent to them, unauthenticated), an sshd on a
// port the node itself uses, and more towers than the pool has nodes (the port is taken once
// per node, so a second tower there stays Pending).

// nodePorts are the ports a Kubernetes node itself listens on, which a host-network sshd must
// not take. They follow the Kubernetes documentation's "Ports and Protocols"
// (kubernetes.io/docs/reference/networking/ports-and-protocols/): the API server, etcd, the
// kubelet, kube-proxy, the scheduler and the controller manager, and the NodePort range
// (nodePortMin..nodePortMax); every port below minNonRootPort (sshd's own 22 among them) too.
var nodePorts = []struct {
	from, to int
	what     string
}{
	{2379, 2380, "etcd"},
	{6443, 6443, "the API server"},
	{10248, 10248, "the kubelet's health check"},
	{10249, 10249, "kube-proxy's metrics"},
	{10250, 10250, "the kubelet's API"},
	{10255, 10255, "the kubelet's read-only API"},
	{10256, 10256, "kube-proxy's health check"},
	{10257, 10257, "the controller manager"},
	{10259, 10259, "the scheduler"},
	{nodePortMin, nodePortMax, "the NodePort range"},
}

// nodePortMin, nodePortMax: Kubernetes' default Service NodePort range, which kube-proxy holds
// on every node.
const (
	nodePortMin = 30000
	nodePortMax = 32767
)

// ValidateHostNetwork checks host-network towers against the sentinels, the sshd port and the
// towers' pool (nil when it is not declared, which is reported elsewhere).
func (c *Config) ValidateHostNetwork(v *Validator, pool *NodePool) {
	t := c.Towers
	if !t.Enabled || !t.HostNetwork {
		return
	}
	if c.Sentinels.Enabled {
		v.add("sentinels.enabled", "true", "with towers.hostNetwork each sentinel would serve Dask's worker and nanny ports, which run any code "+
			"sent to them without authentication, on its node's address, where no NetworkPolicy applies; allowed with towers.hostNetwork: false")
	}
	if dp := c.CloudEntry().CiliumDataplane; dp != "" && !c.Cluster.PodMetadataAccess {
		// The metadata deny admits egress by ipBlock, which Cilium never matches to a node's
		// address (Cloud.CiliumDataplane), so the launcher's ssh to a tower on its node's address
		// is dropped: seen for real on the test bed's Cilium (tests/e2e
		// TestHostNetworkTowersRunForReal before it set cluster.podMetadataAccess).
		v.add("towers.hostNetwork", "true", fmt.Sprintf("on cloud %s the cluster's NetworkPolicies are enforced by Cilium (%s), which counts "+
			"a node's address as the host, never as an ipBlock, so the metadata egress deny every Kolotoc namespace carries would drop the "+
			"launcher's ssh to each tower on its node's address; allowed with cluster.podMetadataAccess: true (a host-network tower sees its "+
			"node's metadata anyway) or towers.hostNetwork: false", c.Cloud, dp))
	}
	port := t.SSHPort
	if port >= 1 && port < minNonRootPort {
		v.add("towers.sshPort", strconv.Itoa(port), fmt.Sprintf("with towers.hostNetwork sshd binds the node's own port, and ports below %d "+
			"are the node's services (its own sshd on 22); allowed: %d..65535 outside the node's ports, default %d", minNonRootPort, minNonRootPort, ring.DefaultSSHPort))
	}
	for _, r := range nodePorts {
		if port >= r.from && port <= r.to {
			v.add("towers.sshPort", strconv.Itoa(port), fmt.Sprintf("with towers.hostNetwork sshd binds the node's own port, and %d is a port "+
				"of the node (%s); allowed: %d..65535 except %s", port, r.what, minNonRootPort, nodePortList()))
		}
	}
	if pool != nil && t.Count > pool.MaxNodes {
		v.add("towers.count", strconv.Itoa(t.Count), fmt.Sprintf("with towers.hostNetwork every tower takes sshd's port on its node, so a node "+
			"holds one tower and the rest stay Pending: pool %q grows to maxNodes %d; allowed: 1..%d", pool.Name, pool.MaxNodes, pool.MaxNodes))
	}
}

// nodePortList is nodePorts as an error message names them.
func nodePortList() string {
	out := make([]string, len(nodePorts))
	for i, r := range nodePorts {
		out[i] = strconv.Itoa(r.from)
		if r.to != r.from {
			out[i] += "-" + strconv.Itoa(r.to)
		}
	}
	return strings.Join(out, ", ")
}
