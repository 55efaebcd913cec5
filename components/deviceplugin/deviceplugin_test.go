package deviceplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

const pinned = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"

func render(t *testing.T) (rendertest.Resource, appsv1.DaemonSet) {
	t.Helper()
	rec := rendertest.Render(t, "device-plugin", &Args{
		Namespace: pulumi.String("kolotoc-dev-gpu-agents"), Image: pinned,
		Labels: meta.Labels{Instance: "dev", Version: "test", Cluster: "c1", PullSecrets: []string{"registry-credentials"}},
	}, New)
	r := rec.One(t, "kubernetes:apps/v1:DaemonSet", "device-plugin")
	return r, rendertest.Decode[appsv1.DaemonSet](t, r)
}

// TestPlacement: the plugin runs on the GPU nodes of this cluster only (a node without the driver
// has nothing to advertise) and tolerates the GPU taint every GPU pool carries
// (nvidia.com/gpu=present:NoSchedule), or it would never start where it is needed.
func TestPlacement(t *testing.T) {
	r, ds := render(t)
	if r.Parent != "device-plugin" {
		t.Errorf("parent %q: want the component", r.Parent)
	}
	pod := ds.Spec.Template.Spec
	want := map[string]string{"nvidia.com/gpu.present": "true", "kolotoc.dev/cluster": "c1"}
	if d := cmp.Diff(want, pod.NodeSelector); d != "" {
		t.Errorf("node selector (-want +got):\n%s", d)
	}
	wantTol := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: "Equal", Value: "present", Effect: "NoSchedule"}}
	if d := cmp.Diff(wantTol, pod.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not select the pod template (labels %v)", k, v, ds.Spec.Template.Labels)
		}
	}
	if _, ok := ds.Spec.Template.Labels["app.kubernetes.io/version"]; ok {
		t.Error("the pod template carries the version label: every upgrade would restart the plugin on every GPU node")
	}
}

// TestContainer: the image is the pinned one, verbatim; the plugin reaches the kubelet's socket
// directory and nothing else on the host; it keeps running while the driver installs.
func TestContainer(t *testing.T) {
	_, ds := render(t)
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != pinned {
		t.Errorf("image %q, want %q as given (pinned by its tag)", c.Image, pinned)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].HostPath == nil || pod.Volumes[0].HostPath.Path != "/var/lib/kubelet/device-plugins" {
		t.Errorf("volumes %+v: want the kubelet's device-plugins directory alone", pod.Volumes)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/var/lib/kubelet/device-plugins" || c.VolumeMounts[0].Name != pod.Volumes[0].Name {
		t.Errorf("mounts %+v: want the device-plugins directory at the kubelet's path", c.VolumeMounts)
	}
	if d := cmp.Diff([]corev1.EnvVar{{Name: "FAIL_ON_INIT_ERROR", Value: "false"}}, c.Env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the plugin mounts a service account token; it talks to the kubelet only")
	}
	if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "registry-credentials" {
		t.Errorf("imagePullSecrets %+v: want the stack's registry credentials", pod.ImagePullSecrets)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %+v: want requests and limits", c.Resources)
	}
}

func TestArgsRequired(t *testing.T) {
	if _, err := New(nil, "device-plugin", nil); err == nil {
		t.Error("New accepted nil args")
	}
}
