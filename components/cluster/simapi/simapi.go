// Package simapi is the contract between the simulated cloud's stacks and the local cluster's
// node-pool controller (testbed/cluster/simpool): the SimulatedNodePool kind and the annotations
// and labels both sides read. It has no dependencies, so that the controller does not link the
// Pulumi SDK.
//
// A SimulatedNodePool is what a cloud's node pool is (a GKE node pool, an EKS node group, an AKS
// agent pool): one object that says how many nodes of which shape; the nodes come from the cloud,
// not from the deployment tool. On the local cluster testbed/cluster/simpool plays the cloud: it
// makes the pool's Nodes, <pool name>-0 … <pool name>-<n-1>, owned by the pool, and reports the
// pool Ready once that many exist at the pool's generation and kwok reports them Ready.
package simapi

import "strconv"

const (
	// Group and Version of the SimulatedNodePool kind.
	Group   = "kolotoc.dev"
	Version = "v1alpha1"
	// APIVersion is Group/Version.
	APIVersion = Group + "/" + Version
	// Kind is the pool's kind; Resource its plural (cluster-scoped).
	Kind     = "SimulatedNodePool"
	Resource = "simulatednodepools"
	// CRDName is the CustomResourceDefinition's name.
	CRDName = Resource + "." + Group

	// PoolLabel, on every Node the controller makes, names its SimulatedNodePool.
	PoolLabel = "kolotoc.dev/simulated-node-pool"
	// GenerationAnnotation, on every Node the controller makes, is the pool generation the node
	// was last made to match.
	GenerationAnnotation = "kolotoc.dev/simulated-node-pool-generation"
	// KwokNodeAnnotation hands a Node to the kwok controller, which then plays its kubelet:
	// keeps it Ready and marks the pods scheduled on it Running.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// CapacityAnnotation carries the node's capacity as a JSON map of resource name to quantity. A
	// Node's status is the kubelet's; the local cluster's kwok node stage
	// (testbed/cluster/kwokctl.yaml) copies this annotation into status.capacity and
	// status.allocatable, as a kubelet would report its hardware.
	CapacityAnnotation = "kolotoc.dev/simulated-capacity"
	// ReadyCondition is the pool's condition that says all its nodes exist and are Ready.
	ReadyCondition = "Ready"
	// FieldManager is the controller's server-side-apply field manager.
	FieldManager = "kolotoc-simpool"
)

// NodeName is the name of the i-th node of a pool.
func NodeName(pool string, i int) string { return pool + "-" + strconv.Itoa(i) }
