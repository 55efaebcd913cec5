package tests

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"kolotoc/components/elastic"
	"kolotoc/components/ring"
	"kolotoc/components/tfcluster"
	"kolotoc/stacks"
)

// trainingPod reports whether a pod template's component trains (and so runs NCCL and data
// loaders): a tower, an elastic worker or a TensorFlow task (not the cluster's TensorBoard).
func trainingPod(component string) bool {
	return component == ring.Name || component == elastic.Component ||
		(strings.HasPrefix(component, tfcluster.NamePrefix) && component != tfcluster.TensorBoardName)
}

// shmOf is the /dev/shm of a pod template's first container: the volume mounted there, and its
// emptyDir's medium and sizeLimit ("" when there is no such mount).
func shmOf(spec corev1.PodSpec) (medium, size string) {
	if len(spec.Containers) == 0 {
		return "", ""
	}
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath != "/dev/shm" {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				if v.EmptyDir.SizeLimit != nil {
					size = v.EmptyDir.SizeLimit.String()
				}
				return string(v.EmptyDir.Medium), size
			}
		}
	}
	return "", ""
}

// TestTrainingPodsShm: the container runtime's /dev/shm is 64 MiB, under which NCCL fails to
// initialize ("failed to extend /dev/shm/nccl-… to 4194660 bytes": NCCL User Guide,
// Troubleshooting, "Runtime and MPI issues", Shared memory, which asks containers for at least
// --shm-size=1g) and DataLoader workers stall. Before this test only the elastic workers had a
// memory-backed one; the towers and the TensorFlow tasks ran on the runtime's. In every layout,
// every training pod's container mounts a memory-backed emptyDir on /dev/shm, by default as large
// as the container's memory (Kubernetes sizes the tmpfs at sizeLimit and charges it to the
// pod's memory, so more could never be used).
func TestTrainingPodsShm(t *testing.T) {
	layouts := securityLayouts(t)
	layouts["workloads-gpu"] = workloadsRaw(t, nil)
	seen := map[string]bool{}
	for name, raw := range layouts {
		t.Run(name, func(t *testing.T) {
			rec := deploy(t, raw)
			for _, p := range podTemplates(t, rec) {
				if !trainingPod(p.component) {
					continue
				}
				seen[p.component] = true
				medium, size := shmOf(p.spec)
				res := p.spec.Containers[0].Resources
				mem, ok := res.Limits[corev1.ResourceMemory]
				if !ok {
					mem = res.Requests[corev1.ResourceMemory]
				}
				memory := mem.String()
				if medium != "Memory" || size != memory {
					t.Errorf("%s (%s): /dev/shm medium %q size %q, want a memory-backed emptyDir of the container's memory %q", p.owner, p.component, medium, size, memory)
				}
			}
		})
	}
	for _, c := range []string{ring.Name, elastic.Component, tfcluster.TaskName(tfcluster.TypeWorker)} {
		if !seen[c] {
			t.Errorf("no layout registers a %s pod: the test checks nothing of it", c)
		}
	}
}

// TestShmSizeConfig: each training section sizes its /dev/shm (towers.shmSize, elastic.shmSize,
// tfcluster.<role>.shmSize), and a size larger than the pod's memory, or no quantity at all, is
// refused before anything is registered, naming the key, the value and the limit.
func TestShmSizeConfig(t *testing.T) {
	raw := workloadsRaw(t, map[string]string{
		"towers":  `{"count":2,"gpusPerTower":8,"memory":"64Gi","shmSize":"8Gi"}`,
		"elastic": `{"enabled":true,"memory":"32Gi","shmSize":"2Gi"}`,
	})
	raw.Values["kolotoc:sshKeySeed"], raw.Secrets["kolotoc:sshKeySeed"] = testSeed, true // towers on
	rec := deploy(t, raw)
	got := map[string]string{}
	for _, p := range podTemplates(t, rec) {
		if trainingPod(p.component) {
			_, got[p.component] = shmOf(p.spec)
		}
	}
	for comp, want := range map[string]string{ring.Name: "8Gi", elastic.Component: "2Gi"} {
		if got[comp] != want {
			t.Errorf("%s: /dev/shm %q, want %s (its section's shmSize)", comp, got[comp], want)
		}
	}

	for _, tc := range []struct{ key, section, want string }{
		{"towers", `{"count":2,"memory":"16Gi","shmSize":"32Gi"}`, "kolotoc:towers.shmSize = 32Gi: must be at most towers.memory (16Gi)"},
		{"elastic", `{"enabled":true,"shmSize":"lots"}`, "kolotoc:elastic.shmSize = lots: must be a positive quantity"},
		{"tfcluster", `{"enabled":true,"workers":{"memory":"16Gi","shmSize":"17Gi"}}`, "kolotoc:tfcluster.workers.shmSize = 17Gi: must be at most tfcluster.workers.memory (16Gi)"},
	} {
		raw := workloadsRaw(t, map[string]string{tc.key: tc.section})
		raw.Values["kolotoc:sshKeySeed"], raw.Secrets["kolotoc:sshKeySeed"] = testSeed, true
		_, err := stacks.Load(raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s = %s: error %v, want one containing %q", tc.key, tc.section, err, tc.want)
		}
	}
}
