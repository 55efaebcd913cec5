package fabric

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// TestPluginAsUpstream: the EFA device plugin's pod is what upstream's chart renders (eks-charts,
// stable/aws-efa-k8s-device-plugin, templates/daemonset.yaml): the node's network, priority
// system-node-critical, CriticalAddonsOnly tolerated, and the kubelet's device-plugins directory
// and the node's /dev/infiniband mounted (the chart's Neuron mount aside).
func TestPluginAsUpstream(t *testing.T) {
	rec := rendertest.Render(t, "efa-device-plugin", &Args{
		Namespace: pulumi.String("kolotoc-aws-gpu-agents"), Image: DefaultPluginImage("us-east-1"),
		Labels: meta.Labels{Instance: "aws", Version: "test"},
	}, NewPlugin)
	ds := rendertest.Decode[appsv1.DaemonSet](t, rec.One(t, "kubernetes:apps/v1:DaemonSet", "efa-device-plugin"))
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork || pod.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %v priorityClassName %q, want true and system-node-critical", pod.HostNetwork, pod.PriorityClassName)
	}
	wantTol := []corev1.Toleration{
		{Key: "CriticalAddonsOnly", Operator: "Exists"},
		{Key: "nvidia.com/gpu", Operator: "Equal", Value: "present", Effect: "NoSchedule"},
	}
	if d := cmp.Diff(wantTol, pod.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
	mounts := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	want := map[string]string{"device-plugin": "/var/lib/kubelet/device-plugins", "infiniband": "/dev/infiniband"}
	if d := cmp.Diff(want, mounts); d != "" {
		t.Errorf("mounts (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, hostPaths); d != "" {
		t.Errorf("host paths (-want +got):\n%s", d)
	}
}

// TestShareRequests: a share asks for its devices and their huge pages with limits equal to the
// requests (Kubernetes, "Manage HugePages": huge page requests must equal limits), and nothing
// without devices.
func TestShareRequests(t *testing.T) {
	s := Share{Resource: EFAResource, PerPod: 4, HugePages: HugePages(8, 8)}
	want := map[string]string{EFAResource: "4", HugePagesResource: "5120Mi"}
	if d := cmp.Diff(want, s.Requests()); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	if got := (Share{HugePages: "5120Mi"}).Requests(); len(got) != 0 {
		t.Errorf("a share without devices requests %v", got)
	}
}
