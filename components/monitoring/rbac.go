package monitoring

import (
	"fmt"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	rbacv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/rbac/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// What Prometheus's service account may read, and nothing more: it discovers the pods it
// scrapes (Dask, the DCGM exporter) in the namespaces they run in, and finds kube-state-metrics
// through its Service wherever the cluster runs it. Pod specs are read only in Kolotoc's own
// namespaces; cluster-wide it sees Services (names, labels, ports) alone.

// newPrometheusRBAC registers the roles and their bindings and returns the bindings, which the
// Prometheus Deployment waits for.
func newPrometheusRBAC(ctx *pulumi.Context, name string, args *Args, sa pulumi.Resource, parent pulumi.ResourceOption) ([]pulumi.Resource, error) {
	var bindings []pulumi.Resource
	bind := func(suffix string, ns pulumi.StringInput) error {
		role, err := rbacv1.NewRole(ctx, name+suffix, RenderRole(args, ns), parent)
		if err != nil {
			return fmt.Errorf("Role %q: %w", name+suffix, err)
		}
		b, err := rbacv1.NewRoleBinding(ctx, name+suffix, RenderRoleBinding(args, ns), parent, pulumi.DependsOn([]pulumi.Resource{sa, role}))
		if err != nil {
			return fmt.Errorf("RoleBinding %q: %w", name+suffix, err)
		}
		bindings = append(bindings, b)
		return nil
	}
	if err := bind("-prometheus", args.Namespace); err != nil {
		return nil, err
	}
	if args.DCGMOn() && args.AgentsNamespace != nil {
		if err := bind("-prometheus-dcgm", args.AgentsNamespace); err != nil {
			return nil, err
		}
	}
	role, err := rbacv1.NewClusterRole(ctx, name+"-prometheus", RenderClusterRole(args), parent)
	if err != nil {
		return nil, fmt.Errorf("ClusterRole %q: %w", name+"-prometheus", err)
	}
	b, err := rbacv1.NewClusterRoleBinding(ctx, name+"-prometheus", RenderClusterRoleBinding(args), parent,
		pulumi.DependsOn([]pulumi.Resource{sa, role}))
	if err != nil {
		return nil, fmt.Errorf("ClusterRoleBinding %q: %w", name+"-prometheus", err)
	}
	return append(bindings, b), nil
}

// agentsNamespace is the DCGM exporter's namespace.
func agentsNamespace(a *Args) pulumi.StringInput {
	if a.AgentsNamespace != nil {
		return a.AgentsNamespace
	}
	return a.Namespace
}

// agentsNamespaceDNS is the DCGM exporter's namespace name.
func agentsNamespaceDNS(a *Args) string {
	if a.AgentsNamespaceDNS != "" {
		return a.AgentsNamespaceDNS
	}
	return a.NamespaceDNS
}

// clusterScopedName names a cluster-scoped object after the namespace, so that two stacks on
// one cluster do not collide.
func clusterScopedName(a *Args) string { return a.NamespaceDNS + "-" + PrometheusName }

// RenderServiceAccount is Prometheus's identity for service discovery.
func RenderServiceAccount(a *Args) *corev1.ServiceAccountArgs {
	return &corev1.ServiceAccountArgs{Metadata: a.Labels.ObjectMeta(PrometheusName, a.Namespace, PrometheusName)}
}

var readOnly = pulumi.ToStringArray([]string{"get", "list", "watch"})

// RenderRole lets Prometheus list and watch the pods of one namespace (kubernetes_sd role pod).
func RenderRole(a *Args, namespace pulumi.StringInput) *rbacv1.RoleArgs {
	return &rbacv1.RoleArgs{
		Metadata: a.Labels.ObjectMeta(PrometheusName, namespace, PrometheusName),
		Rules: rbacv1.PolicyRuleArray{rbacv1.PolicyRuleArgs{
			ApiGroups: pulumi.ToStringArray([]string{""}), Resources: pulumi.ToStringArray([]string{"pods"}), Verbs: readOnly,
		}},
	}
}

// RenderRoleBinding grants a namespace's Role to Prometheus's service account.
func RenderRoleBinding(a *Args, namespace pulumi.StringInput) *rbacv1.RoleBindingArgs {
	return &rbacv1.RoleBindingArgs{
		Metadata: a.Labels.ObjectMeta(PrometheusName, namespace, PrometheusName),
		RoleRef: &rbacv1.RoleRefArgs{
			ApiGroup: pulumi.String("rbac.authorization.k8s.io"), Kind: pulumi.String("Role"), Name: pulumi.String(PrometheusName),
		},
		Subjects: rbacv1.SubjectArray{rbacv1.SubjectArgs{
			Kind: pulumi.String("ServiceAccount"), Name: pulumi.String(PrometheusName), Namespace: a.Namespace,
		}},
	}
}

// RenderClusterRole lets Prometheus find kube-state-metrics (kubernetes_sd role service):
// Services, read-only, in every namespace.
func RenderClusterRole(a *Args) *rbacv1.ClusterRoleArgs {
	return &rbacv1.ClusterRoleArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(clusterScopedName(a)), Labels: pulumi.ToStringMap(a.Labels.For(PrometheusName))},
		Rules: rbacv1.PolicyRuleArray{rbacv1.PolicyRuleArgs{
			ApiGroups: pulumi.ToStringArray([]string{""}), Resources: pulumi.ToStringArray([]string{"services"}), Verbs: readOnly,
		}},
	}
}

// RenderClusterRoleBinding grants the cluster role to Prometheus's service account.
func RenderClusterRoleBinding(a *Args) *rbacv1.ClusterRoleBindingArgs {
	return &rbacv1.ClusterRoleBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(clusterScopedName(a)), Labels: pulumi.ToStringMap(a.Labels.For(PrometheusName))},
		RoleRef: &rbacv1.RoleRefArgs{
			ApiGroup: pulumi.String("rbac.authorization.k8s.io"), Kind: pulumi.String("ClusterRole"), Name: pulumi.String(clusterScopedName(a)),
		},
		Subjects: rbacv1.SubjectArray{rbacv1.SubjectArgs{
			Kind: pulumi.String("ServiceAccount"), Name: pulumi.String(PrometheusName), Namespace: a.Namespace,
		}},
	}
}
