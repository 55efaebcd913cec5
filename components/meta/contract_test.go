package meta

import (
	"strings"
	"testing"
)

type problems []string

func (p *problems) Add(key, value, msg string) { *p = append(*p, key+"="+value+": "+msg) }

// TestGrace: the default grace period on a pool, and what a grace period may be, under a cloud's
// Spot notice (each cloud's own is checked against its document in stacks/clouds).
func TestGrace(t *testing.T) {
	for _, want := range []int{30, 120} {
		n := &SpotNotice{Seconds: want, What: "a notice"}
		if got := GraceDefault(n, true); got != min(want, DefaultTerminationGraceSeconds) {
			t.Errorf("%d s notice, spot: default grace %d, want %d", want, got, min(want, DefaultTerminationGraceSeconds))
		}
		if got := GraceDefault(n, false); got != DefaultTerminationGraceSeconds {
			t.Errorf("%d s notice, on demand: default grace %d, want %d", want, got, DefaultTerminationGraceSeconds)
		}
		var ok1, over problems
		CheckGrace(&ok1, "towers.terminationGracePeriodSeconds", want, "gcp", n, true, "gpu")
		CheckGrace(&over, "towers.terminationGracePeriodSeconds", want+1, "gcp", n, true, "gpu")
		if len(ok1) != 0 || len(over) != 1 || !strings.Contains(over[0], "towers.terminationGracePeriodSeconds=") ||
			!strings.Contains(over[0], "allowed: 1..") {
			t.Errorf("%d s notice: %d s gives %v, %d s gives %v; want the notice accepted, a second more refused", want, want, ok1, want+1, over)
		}
	}
	// No notice known (existing and simulated clusters), or on demand: nothing but >= 1.
	var p problems
	CheckGrace(&p, "k", 3600, "simulated", nil, true, "gpu")
	CheckGrace(&p, "k", 3600, "gcp", &SpotNotice{Seconds: 30}, false, "gpu")
	if len(p) != 0 {
		t.Errorf("refused without a notice: %v", p)
	}
	if GraceDefault(nil, true) != DefaultTerminationGraceSeconds {
		t.Errorf("no notice: default grace %d", GraceDefault(nil, true))
	}
	CheckGrace(&p, "k", 0, "aws", nil, false, "gpu")
	if len(p) != 1 {
		t.Errorf("a grace period of 0 accepted")
	}
}
