package tests

import (
	"strings"
	"testing"

	"kolotoc/stacks"
)

// TestWhereDataLives (issue 33): the TF charts named their Azure share and the torchelastic guide
// chose its EFS modes. storage.shareName names the share Kolotoc creates, and the volume mounts
// that share; storage.performanceMode and storage.tier provisioned (with storage.throughputMibps)
// reach the EFS file system. Their defaults register what was registered before (the share
// "shared", generalPurpose, elastic), and the storage identity the guard records does not change
// for a stack that does not set them (so an upgrade is not seen as a new store).
func TestWhereDataLives(t *testing.T) {
	t.Run("azure share name", func(t *testing.T) {
		raw := cloudRaw(t, "azure", map[string]string{"storage": `{"type":"azurefiles","tier":"Premium","shareName":"tf-checkpoints","size":"1Ti"}`})
		rec := deploy(t, raw)
		if got := get(inputs(rec.one(t, tFileShare, "shared-store")), "shareName"); got != "tf-checkpoints" {
			t.Errorf("share %v, want tf-checkpoints", got)
		}
		csi := get(inputs(rec.one(t, tPV, "storage")), "spec", "csi")
		if h, _ := get(csi, "volumeHandle").(string); !strings.HasSuffix(h, "#tf-checkpoints") && !strings.HasSuffix(h, "_tf-checkpoints") {
			t.Errorf("volume handle %q does not name the share", h)
		}
		if get(csi, "volumeAttributes", "shareName") != "tf-checkpoints" {
			t.Errorf("volume attributes %v", get(csi, "volumeAttributes"))
		}
		cfg, err := stacks.Load(raw)
		if err != nil {
			t.Fatal(err)
		}
		if id := stacks.StorageIdentity(cfg); id["storage.shareName"] != "tf-checkpoints" {
			t.Errorf("identity %v lacks the share's name: a renamed share would replace it unguarded", id)
		}
		cfg, err = stacks.Load(cloudRaw(t, "azure", nil))
		if err != nil {
			t.Fatal(err)
		}
		if id := stacks.StorageIdentity(cfg); id["storage.shareName"] != "" {
			t.Errorf("the default share name is recorded in the identity %v: every existing stack's would change", id)
		}
		if got := get(inputs(deploy(t, cloudRaw(t, "azure", nil)).one(t, tFileShare, "shared-store")), "shareName"); got != "shared" {
			t.Errorf("default share %v, want shared", got)
		}
	})
	t.Run("efs modes", func(t *testing.T) {
		for _, tc := range []struct {
			storage                string
			wantPerf, wantThrough  string
			wantMibps              any
			wantIdentityPerfRecord string
		}{
			{`{"type":"efs","tier":"elastic"}`, "generalPurpose", "elastic", nil, ""},
			{`{"type":"efs","tier":"bursting","performanceMode":"maxIO"}`, "maxIO", "bursting", nil, "maxIO"},
			{`{"type":"efs","tier":"provisioned","throughputMibps":512}`, "generalPurpose", "provisioned", 512.0, ""},
		} {
			raw := cloudRaw(t, "aws", map[string]string{"storage": tc.storage})
			fs := inputs(deploy(t, raw).one(t, tEFS, "shared-store"))
			if get(fs, "performanceMode") != tc.wantPerf || get(fs, "throughputMode") != tc.wantThrough || get(fs, "provisionedThroughputInMibps") != tc.wantMibps {
				t.Errorf("%s: EFS performance %v throughput %v provisioned %v; want %s %s %v", tc.storage,
					get(fs, "performanceMode"), get(fs, "throughputMode"), get(fs, "provisionedThroughputInMibps"), tc.wantPerf, tc.wantThrough, tc.wantMibps)
			}
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := stacks.StorageIdentity(cfg)["storage.performanceMode"]; got != tc.wantIdentityPerfRecord {
				t.Errorf("%s: identity records performanceMode %q, want %q", tc.storage, got, tc.wantIdentityPerfRecord)
			}
		}
	})
}

// TestTFDirectories: tfcluster.checkpointDir, .logDir and .evalDir name the TF charts' train, log
// and eval directories on the shared store; every task gets them as $KOLOTOC_CHECKPOINT_DIR,
// $KOLOTOC_LOG_DIR and $KOLOTOC_EVAL_DIR, and the cluster's own TensorBoard reads a log
// directory outside logs/ itself.
func TestTFDirectories(t *testing.T) {
	raw := workloadsRaw(t, map[string]string{
		"tfcluster":  `{"enabled":true,"ps":{"count":2},"workers":{"count":2,"gpus":4},"checkpointDir":"train/resnet","logDir":"tb/resnet","evalDir":"eval/resnet"}`,
		"entrypoint": `{"tensorboard":false}`,
	})
	rec := deploy(t, raw)
	for _, name := range []string{"tfcluster-ps", "tfcluster-worker", "tfcluster-chief", "tfcluster-evaluator"} {
		env := map[string]any{}
		for _, e := range get(inputs(rec.one(t, tStatefulSet, name)), "spec", "template", "spec", "containers", "[0]", "env").([]any) {
			env[get(e, "name").(string)] = get(e, "value")
		}
		if env["KOLOTOC_CHECKPOINT_DIR"] != "/shared/train/resnet" || env["KOLOTOC_LOG_DIR"] != "/shared/tb/resnet" || env["KOLOTOC_EVAL_DIR"] != "/shared/eval/resnet" {
			t.Errorf("%s directories: %v %v %v", name, env["KOLOTOC_CHECKPOINT_DIR"], env["KOLOTOC_LOG_DIR"], env["KOLOTOC_EVAL_DIR"])
		}
	}
	found := false
	for _, r := range rec.ofType(tDeployment) {
		args, _ := get(inputs(r), "spec", "template", "spec", "containers", "[0]", "command").([]any)
		for _, a := range args {
			if a == "--logdir=/shared/tb/resnet" {
				found = true
			}
		}
	}
	if !found {
		t.Error("the cluster's own TensorBoard does not read /shared/tb/resnet")
	}
}
