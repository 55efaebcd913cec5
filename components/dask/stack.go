package dask

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
	"kolotoc/components/meta"
)

// What the Dask workers ask of the stack around them: the NetworkPolicy allow their processes
// need and the stack outputs that reach the carriers. The scheduler and its dashboard are the
// entrypoint's; the stack composes them with the other workloads'.

// carrierContainer is the carriers' dask-worker container, the one a shell enters.
const carrierContainer = "dask-worker"

// ProcessPorts are the ports from first that n worker processes of a pod listen on (at least one),
// as a NetworkPolicy admits them.
func ProcessPorts(first, n int) isolation.Port {
	return isolation.Port{Port: first, EndPort: first + max(n, 1) - 1}
}

// Allows are the NetworkPolicy allows of the Dask workers: the pods of the components in workers
// (the carriers, the towers when sentinels run beside them) and the scheduler's pods (component
// scheduler) reach each worker process and its nanny on their fixed port ranges, and nothing else
// does. processes is the most worker processes a pod of them runs: the ports admitted are theirs
// only. None without workers.
func Allows(scheduler string, workers []string, processes int) []isolation.Allow {
	if len(workers) == 0 {
		return nil
	}
	return []isolation.Allow{{
		Name: "dask-workers", Pods: workers,
		Ports: []isolation.Port{ProcessPorts(WorkerPortFirst, processes), ProcessPorts(NannyPortFirst, processes)},
		From:  []isolation.Peer{{Components: append([]string{scheduler}, workers...)}},
		Why:   "The scheduler and the other workers reach each Dask worker process and nanny on their fixed port ranges.",
	}}
}

// Outputs are the carriers' stack outputs, of sizes that do not grow with the carriers: a shell
// in the first carrier (the old `goto carrier 0`), a shell in and the log of any carrier (carrier
// N, with meta.PodIndex), and their count. kubectl renders a kubectl command line for the
// stack's cluster.
func Outputs(name, namespace string, count int, kubectl func(format string, a ...any) pulumi.StringOutput) pulumi.Map {
	return pulumi.Map{
		"gotoCarrier":  kubectl("-n %s exec -it %s-0 -c %s -- bash", namespace, name, carrierContainer),
		"gotoCarrierN": kubectl("-n %s exec -it %s-%s -c %s -- bash", namespace, name, meta.PodIndex, carrierContainer),
		"carrierLogsN": kubectl("-n %s logs -f %s-%s -c %s", namespace, name, meta.PodIndex, carrierContainer),
		"carrierCount": pulumi.Int(count),
	}
}
