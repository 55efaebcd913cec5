// Package e2e is the end-to-end suite: the real Pulumi CLI runs this program against the local
// cluster (testbed/cluster/cluster.sh), through the real Kubernetes provider plugin,
// pulumi-resource-kubernetes v4.25.0 built from its module (testbed/tools/tools.sh). `make e2e` /
// `make test` set the environment: PATH with .kolotoc/bin first and KOLOTOC_KUBECONFIG. Each test
// gets its own file backend, passphrase and stack, and removes what it deployed even when it fails.
// The top-level tests run in parallel: their stacks share nothing but the cluster (own namespace,
// nodes and volumes), and most of their time is spent waiting for it.
package e2e
