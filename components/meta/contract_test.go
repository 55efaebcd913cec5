package meta

import (
	"strings"
	"testing"
)

type problems []string

func (p *problems) Add(key, value, msg string) { *p = append(*p, key+"="+value+": "+msg) }

// TestSpotNotices: each cloud's Spot notice as its documentation says it, and what a grace period
// may be on a Spot pool there.
//   - GCP: after the preemption notice, Compute Engine sends the VM an ACPI G2 soft off, and GKE
//     gives the node's Pods a 30-second graceful termination by default, the first 15 s to regular
//     Pods, the next 15 s to critical system Pods (GKE "Spot VMs", terminating and gracefully
//     shutting down Spot VMs, docs.cloud.google.com/kubernetes-engine/docs/concepts/spot-vms).
//   - AWS: "A Spot Instance interruption notice is a warning that is issued two minutes before
//     Amazon EC2 stops or terminates your Spot Instance" (EC2 User Guide, "Spot Instance
//     interruption notices").
//   - Azure: Scheduled Events schedule a Preempt event (a Spot eviction) a minimum of 30 seconds
//     ahead (Azure "Scheduled Events for Linux VMs", event scheduling:
//     "| Preempt | 30 seconds |").
func TestSpotNotices(t *testing.T) {
	for cloud, want := range map[string]int{"gcp": 30, "aws": 120, "azure": 30} {
		n, ok := SpotNotices[cloud]
		if !ok || n.Seconds != want || n.Doc == "" {
			t.Errorf("%s: notice %+v, want %d s with its document", cloud, n, want)
		}
		if got := GraceDefault(cloud, true); got != min(want, DefaultTerminationGraceSeconds) {
			t.Errorf("%s spot: default grace %d, want %d", cloud, got, min(want, DefaultTerminationGraceSeconds))
		}
		if got := GraceDefault(cloud, false); got != DefaultTerminationGraceSeconds {
			t.Errorf("%s on demand: default grace %d, want %d", cloud, got, DefaultTerminationGraceSeconds)
		}
		var ok1, over problems
		CheckGrace(&ok1, "towers.terminationGracePeriodSeconds", want, cloud, true, "gpu")
		CheckGrace(&over, "towers.terminationGracePeriodSeconds", want+1, cloud, true, "gpu")
		if len(ok1) != 0 || len(over) != 1 || !strings.Contains(over[0], "towers.terminationGracePeriodSeconds=") ||
			!strings.Contains(over[0], "allowed: 1..") {
			t.Errorf("%s: %d s gives %v, %d s gives %v; want the notice accepted, a second more refused", cloud, want, ok1, want+1, over)
		}
	}
	// No notice is known on existing and simulated clusters, nor on demand: nothing but >= 1.
	var p problems
	CheckGrace(&p, "k", 3600, "simulated", true, "gpu")
	CheckGrace(&p, "k", 3600, "gcp", false, "gpu")
	if len(p) != 0 {
		t.Errorf("refused without a notice: %v", p)
	}
	CheckGrace(&p, "k", 0, "aws", false, "gpu")
	if len(p) != 1 {
		t.Errorf("a grace period of 0 accepted")
	}
}
