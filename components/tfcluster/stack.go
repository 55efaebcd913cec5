package tfcluster

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
	"kolotoc/components/meta"
)

// What the TensorFlow cluster asks of the stack around it: the NetworkPolicy allows its tasks and
// its own TensorBoard need, and the stack outputs that reach them. Whether it runs its own
// TensorBoard the stack decides (a.OwnTensorBoard), from the entrypoint's.

// Allows are the NetworkPolicy allows of the cluster: the task types of the cluster spec that
// run (all but the evaluator, which only reads checkpoints) reach each other's gRPC port; the
// namespace's pods reach the cluster's own TensorBoard, when it runs one.
func Allows(a *Args) []isolation.Allow {
	var tasks []string
	for _, t := range a.Tasks {
		if t.Count > 0 && t.Type != TypeEvaluator {
			tasks = append(tasks, t.Name)
		}
	}
	out := []isolation.Allow{{
		Name: "tf-tasks", Pods: tasks, Ports: []isolation.Port{{Port: a.Port}},
		From: []isolation.Peer{{Components: tasks}},
		Why:  "The TensorFlow tasks of the cluster spec (chief, workers, parameter servers) reach each other's gRPC port.",
	}}
	if a.OwnTensorBoard != nil {
		out = append(out, isolation.Allow{
			Name: "tf-tensorboard", Pods: []string{TensorBoardComponent},
			Ports: []isolation.Port{{Port: TensorBoardPort}}, From: []isolation.Peer{{AllPods: true}},
			Why: "The cluster's own TensorBoard, from the namespace's pods (and `kubectl port-forward`).",
		})
	}
	return out
}

// Outputs are the cluster's stack outputs: its cluster spec (every task's address), the chief's
// log when a chief runs, the log of and a shell in any task (task type TASK, index N: the TF
// charts' `kubectl logs -f` on any task) with the count of each type, and how to reach the
// cluster's own TensorBoard when it runs one. Their size does not grow with the tasks. kubectl
// renders a kubectl command line for the stack's cluster.
func Outputs(a *Args, kubectl func(format string, a ...any) pulumi.StringOutput) pulumi.Map {
	out := pulumi.Map{}
	if spec, err := ClusterSpecJSON(a); err == nil {
		out["tfClusterSpec"] = pulumi.String(spec)
	}
	counts := pulumi.IntMap{}
	for _, t := range a.Tasks {
		if t.Type == TypeChief && t.Count > 0 {
			// The task's container is named after its type (RenderStatefulSet).
			out["tfChiefLogs"] = kubectl("-n %s logs -f %s-0 -c %s", a.NamespaceDNS, t.Name, t.Type)
		}
		if t.Count > 0 {
			counts[t.Type] = pulumi.Int(t.Count)
		}
	}
	out["tfTaskCounts"] = counts
	// Any task: its pod is TaskName(type)-<index>, its container named after its type.
	task := meta.TaskVar(TypeWorker)
	out["tfTaskLogs"] = kubectl("-n %s logs -f %s%s-%s -c %s", a.NamespaceDNS, NamePrefix, task, meta.PodIndex, task)
	out["gotoTfTask"] = kubectl("-n %s exec -it %s%s-%s -c %s -- bash", a.NamespaceDNS, NamePrefix, task, meta.PodIndex, task)
	if tb := a.OwnTensorBoard; tb != nil {
		out["tfTensorboardUrl"] = pulumi.String(fmt.Sprintf("http://%s.%s.svc:%d/", tb.Name, a.NamespaceDNS, TensorBoardPort))
		out["tfTensorboardPortForward"] = kubectl("-n %s port-forward svc/%s %d:%d", a.NamespaceDNS, tb.Name, TensorBoardPort, TensorBoardPort)
		out["tfTensorboardLocalUrl"] = pulumi.String(fmt.Sprintf("http://localhost:%d/", TensorBoardPort))
	}
	return out
}
