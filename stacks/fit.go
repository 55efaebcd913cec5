package stacks

import (
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// kolotoc:fit marks the throw-away stack `make fit` (cmd/fit) deploys to answer "does this
// environment fit?" on the local cluster. Such a stack must come up whether or not its pods can
// be scheduled, since a pod that stays Pending is the answer, not a failure: with fit on, every
// object whose readiness the Kubernetes provider would await gets the provider's
// pulumi.com/skipAwait annotation. A real stack must never have that, or `pulumi up` would report
// success for an environment that never became ready; so the key is refused on every cloud but
// simulated and beside a real pool (whose pods would really run), and only cmd/fit writes it,
// into its own config file under .kolotoc/fit/ (tests check that no committed stack file sets it).

// SkipAwaitAnnotation makes the Kubernetes provider apply an object without waiting for it to
// become ready (the launcher, in-cluster Services, everything of a fit stack).
const SkipAwaitAnnotation = meta.SkipAwaitAnnotation

// FitAwaitedTypes are the resource types whose readiness the provider awaits and this program
// registers: workloads (their pods ready), Services (endpoints), claims (bound), Jobs (complete).
// The simulated node pools are not among them: a fit stack still waits for its nodes, which come
// up whether or not the pods fit, so that the scheduler judges the pods against every node.
var FitAwaitedTypes = []string{
	"kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet",
	"kubernetes:batch/v1:Job", "kubernetes:core/v1:Service", "kubernetes:core/v1:PersistentVolumeClaim",
	"kubernetes:core/v1:Pod",
}

// validateFit refuses kolotoc:fit wherever it could hide a real environment that is not ready.
func (c *Config) validateFit(v *Validator) {
	if !c.Fit {
		return
	}
	if !c.CloudEntry().Local {
		cloud := c.Cloud
		if cloud == "" {
			cloud = "(unset)"
		}
		v.add("fit", "true", fmt.Sprintf("only the throw-away stacks of `make fit` set it (pulumi up then waits for no readiness); "+
			"allowed with cloud %s: false (it needs cloud %s)", cloud, localCloud()))
	}
	for i, p := range c.NodePools {
		if p.Real {
			v.add(fmt.Sprintf("nodePools[%d].real", i), "true",
				"a fit check places pods on simulated nodes only (on the real node they would run); allowed with kolotoc:fit: false")
		}
	}
}

// registerFit makes every resource registered after it skip the provider's readiness waits, on a
// fit stack only.
func registerFit(ctx *pulumi.Context, c *Config) error {
	if !c.Fit {
		return nil
	}
	return ctx.RegisterStackTransformation(skipAwaitTransformation)
}

// skipAwaitTransformation adds pulumi.com/skipAwait: "true" to the metadata of the resource types
// whose readiness the provider awaits, and leaves every other resource alone.
func skipAwaitTransformation(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
	var props pulumi.Input
	switch a := args.Props.(type) {
	case *appsv1.StatefulSetArgs:
		c := *a
		c.Metadata = withSkipAwait(c.Metadata)
		props = &c
	case *appsv1.DeploymentArgs:
		c := *a
		c.Metadata = withSkipAwait(c.Metadata)
		props = &c
	case *appsv1.DaemonSetArgs:
		c := *a
		c.Metadata = withSkipAwait(c.Metadata)
		props = &c
	case *batchv1.JobArgs:
		c := *a
		c.Metadata = withSkipAwait(c.Metadata)
		props = &c
	case *corev1.ServiceArgs:
		c := *a
		c.Metadata = withSkipAwait(c.Metadata)
		props = &c
	case *corev1.PersistentVolumeClaimArgs:
		c := *a
		c.Metadata = withSkipAwait(c.Metadata)
		props = &c
	case *corev1.PodArgs:
		c := *a
		c.Metadata = withSkipAwait(c.Metadata)
		props = &c
	default:
		// Every other type is left alone; a new way of registering one of FitAwaitedTypes
		// would be too, and tests/fit_test.go fails on it.
		return nil
	}
	return &pulumi.ResourceTransformationResult{Props: props, Opts: args.Opts}
}

// withSkipAwait returns metadata with the skipAwait annotation added to its annotations.
func withSkipAwait(md metav1.ObjectMetaPtrInput) metav1.ObjectMetaPtrInput {
	m, ok := md.(*metav1.ObjectMetaArgs)
	if !ok {
		if md == nil {
			return &metav1.ObjectMetaArgs{Annotations: pulumi.StringMap{SkipAwaitAnnotation: pulumi.String("true")}}
		}
		return md.ToObjectMetaPtrOutput().ApplyT(func(m *metav1.ObjectMeta) *metav1.ObjectMeta {
			c := metav1.ObjectMeta{}
			if m != nil {
				c = *m
			}
			c.Annotations = addSkipAwait(c.Annotations)
			return &c
		}).(metav1.ObjectMetaPtrOutput)
	}
	c := *m
	switch a := m.Annotations.(type) {
	case nil:
		c.Annotations = pulumi.StringMap{SkipAwaitAnnotation: pulumi.String("true")}
	case pulumi.StringMap:
		ann := pulumi.StringMap{SkipAwaitAnnotation: pulumi.String("true")}
		for k, v := range a {
			if k != SkipAwaitAnnotation {
				ann[k] = v
			}
		}
		c.Annotations = ann
	default:
		c.Annotations = a.ToStringMapOutput().ApplyT(addSkipAwait).(pulumi.StringMapOutput)
	}
	return &c
}

func addSkipAwait(a map[string]string) map[string]string {
	out := map[string]string{SkipAwaitAnnotation: "true"}
	for k, v := range a {
		if k != SkipAwaitAnnotation {
			out[k] = v
		}
	}
	return out
}
