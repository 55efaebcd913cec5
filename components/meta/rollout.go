package meta

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi"

// PodShape are the fields of a StatefulSet that shape its pods: what each pod requests (the
// resources of every container: GPUs, CPU, memory) and where it may run (node selector,
// tolerations, affinity). A rolling update of a new shape can stall for good on a full pool: the
// StatefulSet controller replaces one pod at a time and waits for it to be Ready, while the pods
// added by the same change (new shape, Pending for lack of GPUs) stay unready and the old pods
// keep holding the GPUs; reverting the change does not unstick it (kubernetes/kubernetes#67250).
var PodShape = []string{
	"spec.template.spec.containers[*].resources",
	"spec.template.spec.nodeSelector",
	"spec.template.spec.tolerations",
	"spec.template.spec.affinity",
}

// PodSpec is the whole pod spec of a StatefulSet, for workloads whose every pod restarts when any
// one does (an MPI ring: mpirun ends with its first rank).
var PodSpec = []string{"spec.template.spec"}

// ReplaceOnChangesOf makes a change of any of paths replace the whole StatefulSet: the old one
// and its pods are deleted first, then the new one is created under the same name, so its pods
// keep their names and the headless Service their DNS names, and every pod of the new shape is
// scheduled at once into the capacity the old ones freed. A change elsewhere (the replica count
// above all) stays an in-place update.
func ReplaceOnChangesOf(paths []string) pulumi.ResourceOption {
	return pulumi.Composite(pulumi.ReplaceOnChanges(paths), pulumi.DeleteBeforeReplace(true))
}
