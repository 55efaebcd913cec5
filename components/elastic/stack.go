package elastic

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
	"kolotoc/components/meta"
)

// What the elastic workers ask of the stack around them: the NetworkPolicy allow their traffic
// needs and the stack outputs that reach them. Their way to an etcd store is the store's allow.

// workerContainer is the workers' torchrun container, the one a shell enters and the logs follow.
const workerContainer = "worker"

// Allows are the NetworkPolicy allows of the workers: they reach each other on any port, since
// after the c10d store NCCL and gloo connect on ports picked at run time.
func Allows() []isolation.Allow {
	return []isolation.Allow{{
		Name: "elastic-peers", Pods: []string{Component}, From: []isolation.Peer{{Components: []string{Component}}},
		Why: "The elastic workers reach each other on any port: the c10d store, then NCCL and gloo on ports they pick at run time.",
	}}
}

// Outputs are the workers' stack outputs: what a training script needs of the rendezvous
// (torchrun's --rdzv_endpoint and --nnodes), a shell in the first worker and its log, the same
// for any worker (worker N, with meta.PodIndex) and the count of worker pods. kubectl renders a
// kubectl command line for the stack's cluster.
func Outputs(a *Args, kubectl func(format string, a ...any) pulumi.StringOutput) pulumi.Map {
	podN := PodN(a)
	return pulumi.Map{
		"elasticRendezvousEndpoint": pulumi.String(Endpoint(a)),
		"elasticNnodes":             pulumi.String(NNodes(a)),
		"gotoElastic":               kubectl("-n %s exec -it %s-0 -c %s -- bash", a.NamespaceDNS, a.Name, workerContainer),
		"elasticLogs":               kubectl("-n %s logs -f %s-0 -c %s", a.NamespaceDNS, a.Name, workerContainer),
		"gotoElasticN":              kubectl("-n %s exec -it %s -c %s -- bash", a.NamespaceDNS, podN, workerContainer),
		"elasticLogsN":              kubectl("-n %s logs -f %s -c %s", a.NamespaceDNS, podN, workerContainer),
		"elasticNodes":              pulumi.Int(a.Nodes),
	}
}

// PodN is worker N's pod name as a shell word (N from the user's shell, meta.PodIndex). Queued,
// the workers above minNodes are the extras' pods (RenderExtraStatefulSet), whose ordinals
// continue the group's: the shell picks the set from N.
func PodN(a *Args) string {
	if extras(a) > 0 {
		return fmt.Sprintf("%s$([ %s -lt %d ] || echo -extra)-%s", a.Name, meta.PodIndex, a.MinNodes, meta.PodIndex)
	}
	return a.Name + "-" + meta.PodIndex
}
