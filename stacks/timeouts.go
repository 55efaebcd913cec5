package stacks

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cluster"
)

// How long `pulumi up` waits for what the Kubernetes provider awaits (kolotoc:awaitTimeout).
const (
	// defaultAwaitTimeout: on a cloud or an existing cluster the first pod of a GPU pool waits for
	// its node and pulls multi-GB images (CUDA, PyTorch, Horovod, Jupyter); that has taken longer
	// than the provider's own 10 minutes. 30 minutes, a Go duration.
	defaultAwaitTimeout = "30m"
	// defaultLocalAwaitTimeout: the simulated cloud's images are imported into the local node and
	// never pulled, and kwok's pods start at once: the provider's own default, 10 minutes.
	defaultLocalAwaitTimeout = "10m"
	// minAwaitTimeout, maxAwaitTimeout: below a minute a healthy rollout of a few pods already
	// fails; beyond a day a stuck update holds the stack's lock for nothing.
	minAwaitTimeout = time.Minute
	maxAwaitTimeout = 24 * time.Hour
)

// awaitedTypes are the Kubernetes resource types whose creation, update and deletion the provider
// waits for (readiness: rollouts, Job completion, Service endpoints or a LoadBalancer address,
// claim binding; deletion: until the object is gone, a namespace's with its pods). Every other
// object is applied and done.
var awaitedTypes = []string{
	"kubernetes:apps/v1:Deployment",
	"kubernetes:apps/v1:StatefulSet",
	"kubernetes:apps/v1:DaemonSet",
	"kubernetes:batch/v1:Job",
	"kubernetes:core/v1:Pod",
	"kubernetes:core/v1:Service",
	"kubernetes:core/v1:PersistentVolumeClaim",
	"kubernetes:core/v1:PersistentVolume",
	"kubernetes:core/v1:Namespace",
	cluster.PoolType, // by its Ready condition (pulumi.com/waitFor): every node made and Ready
}

func (c *Config) applyTimeoutDefaults() {
	if c.AwaitTimeout != "" {
		return
	}
	c.AwaitTimeout = defaultAwaitTimeout
	if c.CloudEntry().Local {
		c.AwaitTimeout = defaultLocalAwaitTimeout
	}
}

func (c *Config) validateTimeouts(v *Validator) {
	d, err := time.ParseDuration(c.AwaitTimeout)
	if err != nil || d < minAwaitTimeout || d > maxAwaitTimeout || d%time.Second != 0 {
		what := "allowed"
		if err != nil {
			what = "not a duration; allowed"
		}
		v.add("awaitTimeout", c.AwaitTimeout, fmt.Sprintf("%s: a Go duration of whole seconds from %s to %s, e.g. %s (how long `pulumi up` waits for each workload)",
			what, fmtDuration(minAwaitTimeout), fmtDuration(maxAwaitTimeout), defaultAwaitTimeout))
	}
}

// AwaitDuration is the validated kolotoc:awaitTimeout.
func (c *Config) AwaitDuration() time.Duration {
	d, err := time.ParseDuration(c.AwaitTimeout)
	if err != nil {
		d, _ = time.ParseDuration(defaultAwaitTimeout)
	}
	return d
}

// AwaitTimeouts are the custom timeouts of every awaited resource: create, update and delete.
func AwaitTimeouts(c *Config) *pulumi.CustomTimeouts {
	d := fmtDuration(c.AwaitDuration())
	return &pulumi.CustomTimeouts{Create: d, Update: d, Delete: d}
}

// registerAwaitTimeouts gives every awaited Kubernetes resource registered from now on, whichever
// component registers it, the stack's await timeout.
func registerAwaitTimeouts(ctx *pulumi.Context, c *Config) error {
	timeouts := AwaitTimeouts(c)
	return ctx.RegisterStackTransformation(func(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
		if !slices.Contains(awaitedTypes, args.Type) || skipsAwait(args.Props) {
			return nil
		}
		opts := append(slices.Clip(args.Opts), pulumi.Timeouts(timeouts))
		return &pulumi.ResourceTransformationResult{Props: args.Props, Opts: opts}
	})
}

// skipsAwait reports whether a Kubernetes resource's arguments carry pulumi.com/skipAwait: "true"
// in their metadata, as Kolotoc's renderers write it (metav1.ObjectMetaArgs, annotations as a
// pulumi.StringMap).
func skipsAwait(props pulumi.Input) bool {
	v := reflect.ValueOf(props)
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return false
	}
	f := v.FieldByName("Metadata")
	if !f.IsValid() || !f.CanInterface() {
		return false
	}
	var annotations pulumi.StringMapInput
	switch md := f.Interface().(type) {
	case *metav1.ObjectMetaArgs:
		if md == nil {
			return false
		}
		annotations = md.Annotations
	case metav1.ObjectMetaArgs:
		annotations = md.Annotations
	default:
		return false
	}
	m, ok := annotations.(pulumi.StringMap)
	if !ok {
		return false
	}
	s, ok := m[SkipAwaitAnnotation].(pulumi.String)
	return ok && s == "true"
}
