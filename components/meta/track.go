package meta

import (
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Tracker records the custom resources registered under a component (its children, theirs, and
// so on) as they are registered: what something must depend on to wait for the whole component.
//
// A dependency on the component itself is not enough. The SDK expands it into the children the
// component has at that moment, and a child joins its component only from its own registration
// goroutine, so a resource registered just after the constructor returns may miss some: the pull
// Secrets did (TestPullSecretOnEveryPod failed now and then), and so did the elastic workers'
// wait for etcd. The tracker's transformation runs inside each child's registering call, so
// once the constructor has returned, Resources holds every one of them.
type Tracker struct {
	mu        sync.Mutex
	resources []pulumi.Resource
}

// Option is the resource option that makes the component (and so everything under it) report
// to the tracker. It changes nothing that is registered.
func (t *Tracker) Option() pulumi.ResourceOption {
	return pulumi.Transformations([]pulumi.ResourceTransformation{
		func(a *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
			if r, ok := a.Resource.(pulumi.CustomResource); ok {
				t.mu.Lock()
				t.resources = append(t.resources, r)
				t.mu.Unlock()
			}
			return nil
		},
	})
}

// Resources are the custom resources registered so far under the tracked components, in
// registration order.
func (t *Tracker) Resources() []pulumi.Resource {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]pulumi.Resource(nil), t.resources...)
}
