package tests

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// replacedBy reports whether a change at the property path diff replaces r: whether one of its
// ReplaceOnChanges paths contains it, as the Pulumi engine decides (wildcards included).
func replacedBy(t *testing.T, r registered, diff string) bool {
	t.Helper()
	d, err := resource.ParsePropertyPath(diff)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.ReplaceOnChanges {
		path, err := resource.ParsePropertyPath(p)
		if err != nil {
			t.Fatalf("%s: ReplaceOnChanges path %q: %v", r.Name, p, err)
		}
		if path.Contains(d) {
			return true
		}
	}
	return false
}

// TestShapeChangeReplacesWholeSet: a change of the pods' shape (GPUs, CPU, memory, pool) replaces
// the towers', the elastic workers' and the TF tasks' StatefulSets as a whole, deleted before
// they are created again under the same name; a rolling update to a new shape can stall for good
// on a full GPU pool (the e2e test TestTowerShapeChange shows it). A change of replicas stays in
// place, and so do the elastic workers' and TF tasks' other template changes; any change of the
// towers' pods replaces the ring (mpirun ends with its first rank anyway).
func TestShapeChangeReplacesWholeSet(t *testing.T) {
	shape := []string{
		`spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]`,
		`spec.template.spec.containers[0].resources.requests.cpu`,
		`spec.template.spec.containers[0].resources.requests.memory`,
		`spec.template.spec.nodeSelector["kolotoc.dev/pool"]`,
		`spec.template.spec.tolerations[0]`,
	}
	inPlace := []string{`spec.replicas`, `metadata.labels["app.kubernetes.io/version"]`}
	check := func(t *testing.T, rec *recorder, name string, alsoReplacedBy, notReplacedBy []string) {
		t.Helper()
		r := rec.one(t, tStatefulSet, name)
		if !r.DeleteBeforeReplace {
			t.Errorf("StatefulSet %s is not delete-before-replace: its replacement would be created beside it, under the same name", name)
		}
		for _, p := range append(append([]string{}, shape...), alsoReplacedBy...) {
			if !replacedBy(t, r, p) {
				t.Errorf("StatefulSet %s: a change of %s would roll pod by pod (ReplaceOnChanges %v)", name, p, r.ReplaceOnChanges)
			}
		}
		for _, p := range append(append([]string{}, inPlace...), notReplacedBy...) {
			if replacedBy(t, r, p) {
				t.Errorf("StatefulSet %s: a change of %s would replace it (ReplaceOnChanges %v)", name, p, r.ReplaceOnChanges)
			}
		}
	}
	t.Run("towers", func(t *testing.T) {
		rec := deploy(t, layoutRaw(t, 1)) // prod on the simulated cloud
		check(t, rec, "towers", []string{`spec.template.spec.containers[0].image`, `spec.template.spec.containers[1]`}, nil)
		if r := rec.one(t, tStatefulSet, "carriers"); len(r.ReplaceOnChanges) != 0 {
			t.Errorf("carriers replace on %v: Dask workers come and go, they roll in place", r.ReplaceOnChanges)
		}
	})
	t.Run("elastic and tfcluster", func(t *testing.T) {
		rec := deploy(t, workloadsRaw(t, nil))
		image := []string{`spec.template.spec.containers[0].image`, `spec.template.spec.containers[0].env[0].value`}
		for _, name := range []string{"elastic", "tfcluster-ps", "tfcluster-worker", "tfcluster-chief", "tfcluster-evaluator"} {
			check(t, rec, name, nil, image)
		}
	})
}
