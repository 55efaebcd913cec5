package stacks

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kolotoc/components/meta"
)

// Adopting a namespace. The Kubernetes provider creates with server-side apply, which upserts: a
// Namespace object named like one that exists takes it over without a word (pulumi-kubernetes
// await.go: "we currently always upsert the object"), installs the stack's deny-all ingress over
// every pod already there, and `pulumi destroy` deletes it with everything in it. So before the
// namespace is registered, the stack looks at the cluster: a namespace that exists is taken only
// when it is marked as this stack's (the labels every Kolotoc object carries, which the stack
// itself put there), or when kolotoc:adoptNamespace says so; an adopted namespace is kept on
// destroy (retainOnDelete). Where the cluster is the stack's own (gcp, aws, azure: created by the
// stack) nothing else can have made it, and the check is not needed.

// namespaceOwner labels: what marks a namespace as this stack's.
func namespaceMarked(labels map[string]string, stack string) bool {
	return labels["app.kubernetes.io/name"] == meta.PartOf && labels["app.kubernetes.io/instance"] == stack
}

// lookupNamespace reads the namespace's labels from the stack's cluster (exists false when there
// is none). Errors other than "not found" are returned as they are.
type lookupNamespace func(name string) (labels map[string]string, exists bool, err error)

// clusterNamespaces is lookupNamespace against the kubeconfig the stack deploys with.
func clusterNamespaces(c *Config) lookupNamespace {
	return func(name string) (map[string]string, bool, error) {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Cluster.Kubeconfig}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Cluster.Context}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, false, err
		}
		cfg.Timeout = 20 * time.Second
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, false, err
		}
		ns, err := client.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return ns.Labels, true, nil
	}
}

// checkNamespaceAdoption decides whether the stack may register its namespaces (kolotoc:namespace,
// and the GPU agents' one when it has it): retain reports that it adopts one it did not create
// (kept on destroy). A namespace that cannot be looked at (a cluster that refuses the read) is
// warned about in a preview (a preview identity may lack the right) and refused in an update
// (dryRun false): the update would take it over unseen.
func checkNamespaceAdoption(c *Config, lookup lookupNamespace, dryRun bool, warn func(string)) (retain bool, err error) {
	if cl := c.CloudEntry(); !cl.Local && !cl.Given() { // a cluster Kolotoc creates holds no namespace it did not make
		return false, nil
	}
	names := []string{c.Namespace}
	if agents := c.GPUAgentsNamespace(); agents != "" {
		names = append(names, agents)
	}
	for i, name := range names {
		labels, exists, err := lookup(name)
		// A cluster that answers and refuses the read (no right to get namespaces) fails the
		// update closed; one that does not answer fails it anyway, at the provider.
		if err != nil && !dryRun && !c.AdoptNamespace && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			return false, &ConfigError{Stack: c.Stack, Errors: []FieldError{{Key: "namespace", Value: name, Msg: fmt.Sprintf(
				"could not check whether it already exists (%v), and a namespace that exists and is not this stack's would be taken over, "+
					"its pods put under the stack's deny-all ingress and deleted on destroy; allowed: a kubeconfig that may get namespaces, "+
					"or set kolotoc:adoptNamespace: true to take it as it is (it is then kept on destroy)", err)}}}
		}
		if err != nil {
			// In a preview (a preview identity may lack the right) the check is left to the up.
			warn(fmt.Sprintf("could not check whether namespace %s already exists (%v): pulumi up refuses to deploy until it can, or with kolotoc:adoptNamespace: true", name, err))
			continue
		}
		if !exists || c.AdoptNamespace || namespaceMarked(labels, c.Stack) {
			continue
		}
		what := "exists and is not this stack's"
		if owner := labels["app.kubernetes.io/instance"]; labels["app.kubernetes.io/name"] == meta.PartOf && owner != "" {
			what = "belongs to the Kolotoc stack " + owner
		}
		if i > 0 {
			what = "its GPU agents' namespace " + name + " " + what
		}
		return false, &ConfigError{Stack: c.Stack, Errors: []FieldError{{Key: "namespace", Value: c.Namespace, Msg: what +
			": the stack would take it over, put its deny-all ingress over the pods there and delete it on destroy; allowed: a namespace that does not exist yet, " +
			"or set kolotoc:adoptNamespace: true to adopt it (it is then kept on destroy)"}}}
	}
	return c.AdoptNamespace, nil
}
