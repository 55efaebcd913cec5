package standin

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParseWaitFor(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want []condExpr
		err  string
	}{
		{val: "condition=Ready", want: []condExpr{{"Ready", "True"}}},
		{val: "condition=Synced=False", want: []condExpr{{"Synced", "False"}}},
		{val: `["condition=Ready", "condition=Healthy"]`, want: []condExpr{{"Ready", "True"}, {"Healthy", "True"}}},
		{val: `[]`, err: "at least one condition"},
		{val: "jsonpath={.status.phase}=Running", err: "not implemented by the test bed's stand-in"},
		{val: "Ready", err: `expected a "jsonpath=" or "condition=" prefix`},
	} {
		got, err := parseWaitFor(tc.val)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.val, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.val, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.val, got, tc.want)
			}
		}
	}
}

func TestConditionsReadiness(t *testing.T) {
	pool := func(gen int64, conds ...map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "SimulatedNodePool", "metadata": map[string]any{"name": "p", "generation": gen}}}
		if conds != nil {
			var l []any
			for _, c := range conds {
				l = append(l, c)
			}
			u.Object["status"] = map[string]any{"conditions": l}
		}
		return u
	}
	ready := []condExpr{{"Ready", "True"}}
	for _, tc := range []struct {
		name  string
		obj   *unstructured.Unstructured
		ready bool
		why   string
	}{
		{"no status yet", pool(1), false, "no .status.conditions"},
		{"other conditions only", pool(1, map[string]any{"type": "Progressing", "status": "True"}), false, "not reported yet"},
		{"false", pool(1, map[string]any{"type": "Ready", "status": "False", "message": "1/3 nodes Ready", "observedGeneration": int64(1)}), false, "it is False (1/3 nodes Ready)"},
		{"true", pool(1, map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(1)}), true, ""},
		{"true, case folded", pool(1, map[string]any{"type": "ready", "status": "true"}), true, ""},
		// A True left from the last generation is stale: the spec changed since.
		{"true for an older generation", pool(2, map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(1)}), false, "generation 1 is less than expected 2"},
	} {
		r := ConditionsReadiness(tc.obj, ready)
		if r.Ready != tc.ready || !strings.Contains(r.Status, tc.why) {
			t.Errorf("%s: ready %v (%q), want %v with %q", tc.name, r.Ready, r.Status, tc.ready, tc.why)
		}
	}
}
