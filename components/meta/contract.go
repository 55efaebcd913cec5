package meta

import (
	"fmt"
	"strconv"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// The training contract: what every training workload (the towers and their launcher, the
// elastic workers, the TF tasks) tells its program, so that one script checkpoints and resumes
// the same way wherever it runs (docs/using/checkpoints.md).
const (
	// CheckpointDirEnv is the run's checkpoint directory on the shared claim: write checkpoints
	// there, and resume from the newest one found there.
	CheckpointDirEnv = "KOLOTOC_CHECKPOINT_DIR"
	// RunIDEnv is the run's id: towers.run (default DefaultRunID), elastic.rdzvId, tfcluster's
	// checkpoint directory's last element.
	RunIDEnv = "KOLOTOC_RUN_ID"
	// AttemptEnv is the attempt of the run, 0 for the first: the towers' launcher counts its
	// restarts (towers.maxRestarts); elastic workers get torchrun's TORCHELASTIC_RESTART_COUNT.
	AttemptEnv = "KOLOTOC_ATTEMPT"
	// LatestStepFile, in the checkpoint directory, holds the step of the newest complete
	// checkpoint as a decimal number, written by the program after each checkpoint (optional):
	// the towers' run state shows it.
	LatestStepFile = "latest-step"
	// DefaultRunID names a run whose workload sets no id (towers.run unset).
	DefaultRunID = "default"
)

// DefaultTerminationGraceSeconds is the time a training pod gets between SIGTERM and SIGKILL
// (seconds) unless its workload says otherwise or its pool's Spot notice is shorter: enough for a
// large model's checkpoint (a 70B-parameter model's bf16 weights are 140 GB; sharded over 64 GPUs,
// about 2 GB a rank, written at a few hundred MB/s to a cloud file store), and within EC2's
// two-minute Spot interruption notice. Kubernetes' own default is 30 s.
const DefaultTerminationGraceSeconds = 120

// SpotNotice is how long a cloud's Spot node lives after it is told it will be reclaimed: the
// most time its pods can have between SIGTERM and the end. Each cloud entry declares its own
// (stacks.Cloud.SpotNotice); nil where the cloud documents none.
type SpotNotice struct {
	Seconds int
	What    string // the cloud's name for it, for messages
	Doc     string // where the cloud documents it
}

// GraceDefault is a workload's default grace period on a pool: DefaultTerminationGraceSeconds,
// or the Spot notice of the pool's cloud on a Spot pool when that is shorter.
func GraceDefault(notice *SpotNotice, spot bool) int {
	if notice != nil && spot && notice.Seconds < DefaultTerminationGraceSeconds {
		return notice.Seconds
	}
	return DefaultTerminationGraceSeconds
}

// CheckGrace reports a grace period (key, seconds) that is not positive, or that is longer than
// the Spot notice (of cloud) of the pool its pods run on: the node would be gone before the
// checkpoint is written.
func CheckGrace(p Problems, key string, seconds int, cloud string, notice *SpotNotice, spot bool, pool string) {
	if seconds < 1 {
		p.Add(key, strconv.Itoa(seconds), "must be at least 1 (seconds between SIGTERM and SIGKILL)")
		return
	}
	if notice != nil && spot && seconds > notice.Seconds {
		p.Add(key, strconv.Itoa(seconds), fmt.Sprintf(
			"pool %q is Spot capacity on %s, whose nodes are reclaimed %d s after notice (%s): a longer grace period is cut short, and the checkpoint with it; allowed: 1..%d",
			pool, cloud, notice.Seconds, notice.What, notice.Seconds))
	}
}

// ContractEnv is the contract's environment of a workload's containers: its checkpoint
// directory and its run id.
func ContractEnv(checkpointDir, runID string) corev1.EnvVarArray {
	return corev1.EnvVarArray{
		corev1.EnvVarArgs{Name: pulumi.String(CheckpointDirEnv), Value: pulumi.String(checkpointDir)},
		corev1.EnvVarArgs{Name: pulumi.String(RunIDEnv), Value: pulumi.String(runID)},
	}
}
