// Package isolation renders what a Kolotoc namespace enforces: its Pod Security level (the
// Namespace's pod-security.kubernetes.io labels) and its NetworkPolicies — one default-deny of
// ingress plus one allow per concern (policies.go). Which level and which allows a stack needs is
// decided by the stack layer; this package only renders and registers them.
package isolation

import (
	"sort"
	"strings"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// Pod Security Standards levels (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
const (
	Baseline   = "baseline"   // no host namespaces, host paths, privileged containers or added capabilities beyond the runtime's defaults
	Restricted = "restricted" // baseline plus non-root, no capabilities but NET_BIND_SERVICE, a seccomp profile
	Privileged = "privileged" // anything
)

// Pod Security admission labels and Kolotoc's annotation saying why a namespace has its level.
const (
	EnforceLabel     = "pod-security.kubernetes.io/enforce"
	AuditLabel       = "pod-security.kubernetes.io/audit"
	WarnLabel        = "pod-security.kubernetes.io/warn"
	ReasonAnnotation = "kolotoc.dev/pod-security-reason"
)

// Level is a namespace's enforced Pod Security level and, when it is not baseline, the config
// options that need more, each with why ("storage.type in-cluster-nfs: the NFS server is privileged").
type Level struct {
	Enforce string
	Reasons []string
}

// Render builds the Namespace: enforce at the level the stack needs; audit and warn always at
// restricted, so that `kubectl apply`, the API server's audit log and Pulumi's warnings show what
// keeps a workload from the strictest level without refusing anything.
func Render(name string, level Level, labels meta.Labels, component string) *corev1.NamespaceArgs {
	l := labels.For(component)
	l[EnforceLabel] = level.Enforce
	l[AuditLabel] = Restricted
	l[WarnLabel] = Restricted
	md := &metav1.ObjectMetaArgs{Name: pulumi.String(name), Labels: pulumi.ToStringMap(l)}
	if len(level.Reasons) > 0 {
		reasons := append([]string(nil), level.Reasons...)
		sort.Strings(reasons)
		md.Annotations = pulumi.StringMap{ReasonAnnotation: pulumi.String(strings.Join(reasons, "; "))}
	}
	return &corev1.NamespaceArgs{Metadata: md}
}
