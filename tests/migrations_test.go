package tests

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"kolotoc/stacks"
)

// TestMigrationExamples: each old setup's documented example, written as a Kolotoc stack by
// following the README's migration table and docs/migrating-features.md
// (examples/migrations/Pulumi.<setup>.yaml), validates and deploys under the mocks with what the
// old setup did: the chart's sentinels and any-tower commands, the Horovod chart's master image,
// master.env and resources block, the MPI jobs' NFS export and monitoring, the TF charts' light
// parameter servers, share and directories, the torchelastic guide's data download, provisioned
// EFS and --rdzv_conf.
func TestMigrationExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/migrations/Pulumi.*.yaml")
	if err != nil || len(files) != 5 {
		t.Fatalf("migration examples %v (%v), want 5", files, err)
	}
	checks := map[string]func(t *testing.T, rec *recorder, outs map[string]output){
		"kolotoc-chart": func(t *testing.T, rec *recorder, outs map[string]output) {
			if !strings.Contains(str(t, outs, "gotoTowerN"), "tower-${N:-0}") || str(t, outs, "gotoEntrypoint") == "" {
				t.Error("no command reaching any tower, or the scheduler")
			}
			if n := len(templateOf(t, rec.one(t, tStatefulSet, "towers")).Spec.Containers); n != 2 {
				t.Errorf("towers have %d containers, want the tower and its sentinel", n)
			}
		},
		"horovod-chart": func(t *testing.T, rec *recorder, _ map[string]output) {
			launcher := templateOf(t, rec.one(t, tJob, "towers-launcher")).Spec.Containers[0]
			tower := templateOf(t, rec.one(t, tStatefulSet, "towers")).Spec.Containers[0]
			lim := tower.Resources.Limits
			if launcher.Image != "horovod/horovod:0.28.1-cpu" || lim.Name("rdma/hca", "").String() != "1" || lim.Name("hugepages-2Mi", "").String() != "2Gi" {
				t.Errorf("launcher image %v, tower resources %v", launcher.Image, tower.Resources)
			}
		},
		"mpi-nfs": func(t *testing.T, rec *recorder, _ map[string]output) {
			if nfs := decode[corev1.PersistentVolume](t, rec.one(t, tPV, "storage")).Spec.NFS; nfs == nil || nfs.Server != "10.0.0.2" {
				t.Error("the NFS export is not mounted")
			}
		},
		"tf-azure": func(t *testing.T, rec *recorder, _ map[string]output) {
			ps := templateOf(t, rec.one(t, tStatefulSet, "tfcluster-ps")).Spec.Containers[0]
			if ps.Image != "tensorflow/tensorflow:2.17.0" || get(inputs(rec.one(t, tFileShare, "shared-store")), "shareName") != "tf-share" {
				t.Errorf("ps image %v, share %v", ps.Image, get(inputs(rec.one(t, tFileShare, "shared-store")), "shareName"))
			}
		},
		"torchelastic-eks": func(t *testing.T, rec *recorder, outs map[string]output) {
			fs := inputs(rec.one(t, tEFS, "shared-store"))
			if get(fs, "throughputMode") != "provisioned" || get(fs, "provisionedThroughputInMibps") != 256.0 {
				t.Errorf("EFS %v %v", get(fs, "throughputMode"), get(fs, "provisionedThroughputInMibps"))
			}
			rec.one(t, tJob, "data-in")
			w := templateOf(t, rec.one(t, tStatefulSet, "elastic")).Spec.Containers[0]
			if envValues(w)["KOLOTOC_RDZV_CONF"] != "last_call_timeout=5" {
				t.Error("the workers do not get --rdzv_conf last_call_timeout=5")
			}
			if str(t, outs, "dataDir") != "/shared/datasets/tiny-imagenet" {
				t.Errorf("dataDir %q", str(t, outs, "dataDir"))
			}
		},
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "Pulumi."), ".yaml")
		t.Run(name, func(t *testing.T) {
			raw, err := stacks.ReadStackFile(f, "kolotoc", name, "")
			if err != nil {
				t.Fatal(err)
			}
			raw = withTestSecrets(raw, nil)
			raw.Values["kolotoc:grafanaPassword"], raw.Secrets["kolotoc:grafanaPassword"] = grafanaTestPassword, true
			rec, outs := deployOutputs(t, raw)
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no check for %s", name)
			}
			check(t, rec, outs)
		})
	}
}
