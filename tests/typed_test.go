package tests

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"kolotoc/components/meta/rendertest"
)

// Typed reading of what the program registered: a Kubernetes registration is decoded once into
// its k8s.io/api type (decode), and the test reads fields (`sts.Spec.Template.Spec.Containers`)
// instead of walking maps with get. Decoding is strict: a field the API type does not know fails
// the test, so a misspelt key in the program's args cannot pass unseen.

// decode converts a registration into T (rendertest.Decode).
func decode[T any](t *testing.T, r registered) T {
	t.Helper()
	return rendertest.Decode[T](t, r)
}

// nameOf is a Kubernetes registration's metadata.name.
func nameOf(t *testing.T, r registered) string {
	t.Helper()
	return rendertest.DecodeSome[metav1.PartialObjectMetadata](t, r).Name
}

// named decodes the one registration of token whose metadata.name is name.
func named[T any](t *testing.T, rec *recorder, token, name string) T {
	t.Helper()
	for _, r := range rec.ofType(token) {
		if nameOf(t, r) == name {
			return decode[T](t, r)
		}
	}
	t.Fatalf("no %s with metadata.name %s", token, name)
	var zero T
	return zero
}

// templateOf is the pod template of a registered StatefulSet, Deployment, DaemonSet or Job.
func templateOf(t *testing.T, r registered) corev1.PodTemplateSpec {
	t.Helper()
	switch r.Type {
	case tStatefulSet:
		return decode[appsv1.StatefulSet](t, r).Spec.Template
	case tDeployment:
		return decode[appsv1.Deployment](t, r).Spec.Template
	case tDaemonSet:
		return decode[appsv1.DaemonSet](t, r).Spec.Template
	case tJob:
		return decode[batchv1.Job](t, r).Spec.Template
	}
	t.Fatalf("%s %s has no pod template", r.Type, r.Name)
	return corev1.PodTemplateSpec{}
}

// containerNamed is the container (or init container) of a pod spec with that name.
func containerNamed(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range containersOf(pod) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// containersOf is a pod spec's init containers, then its containers.
func containersOf(spec corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
}

// selectorMatches evaluates a LabelSelector as the API server does (k8s.io/apimachinery); a nil
// selector matches everything, as a NetworkPolicy peer that names no pod selector reads.
func selectorMatches(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(l))
}

// envVars is a container's environment by name.
func envVars(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// envValues is a container's plain environment: name → value, the valueFrom entries left out.
func envValues(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			out[e.Name] = e.Value
		}
	}
	return out
}

// isTrue and isFalse read an optional bool that is set: nil is neither.
func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

// orInt is *v, else *fallback, else 0 (a container's runAsUser over its pod's).
func orInt(v, fallback *int64) int64 {
	switch {
	case v != nil:
		return *v
	case fallback != nil:
		return *fallback
	}
	return 0
}

func ptr[T any](v T) *T { return &v }
