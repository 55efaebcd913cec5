package meta

import (
	"strings"
	"testing"
)

// TestGang: every pod of a gang names the queue and the group, with the group's size; a group is
// never retriable (a finished group frees its quota only then); no gang, no change.
func TestGang(t *testing.T) {
	g := &Gang{Queue: "kolotoc", Group: GroupName("tower", "r7"), Total: 5, Priority: "kolotoc-dev-towers"}
	labels, ann := map[string]string{"app": "x"}, map[string]string{}
	g.PodLabels(labels)
	g.PodAnnotations(ann)
	want := map[string]string{"app": "x", QueueNameLabel: "kolotoc", PodGroupNameLabel: "tower-r7", WorkloadPriorityClassLabel: "kolotoc-dev-towers"}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	if ann[PodGroupTotalCountKey] != "5" || ann[PodGroupRetriableKey] != "false" {
		t.Errorf("annotations %v", ann)
	}
	var none *Gang
	l := map[string]string{"app": "x"}
	none.PodLabels(l)
	if len(l) != 1 {
		t.Errorf("no gang changed the labels: %v", l)
	}
	// A label value: at most 63 characters, ending in an alphanumeric.
	if n := GroupName("tower", strings.Repeat("r", 57)+"-x"); len(n) > 63 || strings.HasSuffix(n, "-") {
		t.Errorf("group name %q", n)
	}
}
