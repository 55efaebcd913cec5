package tests

import (
	"regexp"
	"strings"
	"testing"

	"kolotoc/stacks"
)

// Type tokens of the backups (clouds_recovery.go).
const (
	tEFSBackupPolicy = "aws:efs/backupPolicy:BackupPolicy"
	tFileService     = "azure-native:storage:FileServiceProperties"
)

// poolTokens are each cloud's pool type and the inputs that name it: pinned, and generated.
var poolTokens = map[string]struct{ token, pinned, prefix string }{
	stacks.CloudGCP:   {tGKENodePool, "name", "namePrefix"},
	stacks.CloudAWS:   {tEKSNodeGroup, "nodeGroupName", "nodeGroupNamePrefix"},
	stacks.CloudAzure: {tAgentPool, "agentPoolName", ""},
}

// aksGenerated is an agent pool name Kolotoc generates: the pool's name (cut to 8) and four
// hexadecimal digits.
var aksGenerated = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}[0-9a-f]{4}$`)

// TestPoolsCreateFirst: every cloud pool has a generated name and is replaced create-first, so a
// GPU pool keeps its GPUs until its replacement exists (a stockout fails the new pool's creation,
// not the running pool). GKE and EKS take a name prefix, their providers appending a unique suffix
// at each creation (terraform-plugin-sdk's id.PrefixedUniqueId); AKS takes the name Kolotoc
// generates (aks.PoolName).
func TestPoolsCreateFirst(t *testing.T) {
	for _, s := range cloudStacks {
		t.Run(s.name, func(t *testing.T) {
			rec := deploy(t, cloudRaw(t, s.name, nil))
			pt := poolTokens[s.cloud]
			pools := rec.ofType(pt.token)
			if len(pools) < 2 {
				t.Fatalf("%d pools registered", len(pools))
			}
			for _, p := range pools {
				pool := strings.TrimPrefix(p.Name, "cluster-")
				if p.DeleteBeforeReplace {
					t.Errorf("%s: deleteBeforeReplace: a replacement would leave the pool without nodes (a GPU pool without GPUs) until the new one exists", p.Name)
				}
				in := inputs(p)
				switch s.cloud {
				case stacks.CloudAzure:
					name, _ := get(in, pt.pinned).(string)
					if name == pool || !aksGenerated.MatchString(name) || !strings.HasPrefix(name, pool) {
						t.Errorf("%s: agentPoolName %q, want %s and 4 hexadecimal digits: a fixed name cannot be created beside the old pool", p.Name, name, pool)
					}
				default:
					if get(in, pt.pinned) != nil || get(in, pt.prefix) != pool+"-" {
						t.Errorf("%s: %s %v, %s %v; want no fixed name and the prefix %q", p.Name, pt.pinned, get(in, pt.pinned), pt.prefix, get(in, pt.prefix), pool+"-")
					}
				}
			}
		})
	}
}

// TestPoolsPinned: a pool given its old name (nodePools[i].cloudName, the upgrade path) is
// registered as before generated names, so an upgrade replaces nothing, and is replaced
// delete-first (one name cannot exist twice); replace: deleteFirst without a pinned name keeps a
// generated name but deletes first (quota for one pool).
func TestPoolsPinned(t *testing.T) {
	pools := map[string]string{
		stacks.CloudGCP: `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":8,"zones":["us-central1-a"],"cloudName":"gpu"},` +
			`{"name":"cpu","machineType":"n2-standard-16","nodes":2,"maxNodes":4,"zones":["us-central1-a"],"replace":"deleteFirst"}]`,
		stacks.CloudAWS: `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":2,"maxNodes":4,"cloudName":"gpu"},` +
			`{"name":"cpu","machineType":"m6i.4xlarge","nodes":1,"maxNodes":3,"spot":true,"replace":"deleteFirst"},{"name":"ops","machineType":"m6i.large","cloudName":"ops"}]`,
		stacks.CloudAzure: `[{"name":"gpu","machineType":"Standard_ND96asr_v4","nodes":2,"maxNodes":4,"zones":["1"],"cloudName":"gpu"},` +
			`{"name":"cpu","machineType":"Standard_D16s_v5","nodes":1,"maxNodes":3,"replace":"deleteFirst"}]`,
	}
	for _, s := range cloudStacks {
		t.Run(s.name, func(t *testing.T) {
			rec := deploy(t, cloudRaw(t, s.name, map[string]string{"nodePools": pools[s.cloud]}))
			pt := poolTokens[s.cloud]
			gpu := rec.one(t, pt.token, "cluster-gpu")
			if !gpu.DeleteBeforeReplace || get(inputs(gpu), pt.pinned) != "gpu" {
				t.Errorf("pinned pool: %s %v, deleteBeforeReplace %v; want gpu, as before generated names, deleted first",
					pt.pinned, get(inputs(gpu), pt.pinned), gpu.DeleteBeforeReplace)
			}
			if pt.prefix != "" && get(inputs(gpu), pt.prefix) != nil {
				t.Errorf("pinned pool has a %s too: %v", pt.prefix, get(inputs(gpu), pt.prefix))
			}
			cpu := rec.one(t, pt.token, "cluster-cpu")
			name := get(inputs(cpu), pt.pinned)
			if pt.prefix != "" {
				name = get(inputs(cpu), pt.prefix)
			}
			if !cpu.DeleteBeforeReplace || name == "cpu" {
				t.Errorf("replace: deleteFirst: %v, deleteBeforeReplace %v; want a generated name, deleted first", name, cpu.DeleteBeforeReplace)
			}
		})
	}
}

// TestAKSPoolNameFollowsReplacement: AKS fixes a pool's VM size, OS disk, zones, subnet, priority
// and proximity placement group when it creates the pool (AKS, "Create node pools"; "Resize node
// pools": a new pool is the way to a new VM size), so each is in the generated name: a change is
// a new pool beside the old one. What AKS updates in place (counts, autoscaling, labels, taints)
// keeps the name, so it never replaces a pool.
func TestAKSPoolNameFollowsReplacement(t *testing.T) {
	const gpu = `"name":"gpu","machineType":"Standard_ND96asr_v4","nodes":2,"maxNodes":4,"zones":["1"]`
	name := func(pool string) string {
		t.Helper()
		rec := deploy(t, cloudRaw(t, "azure", map[string]string{"nodePools": "[{" + pool + `},{"name":"cpu","machineType":"Standard_D16s_v5"}]`}))
		return get(inputs(rec.one(t, tAgentPool, "cluster-gpu")), "agentPoolName").(string)
	}
	was := name(gpu)
	for _, inPlace := range []string{`,"minNodes":1`, `,"maxNodes":6`, `,"labels":{"team":"vision"}`, `,"taints":[{"key":"team","value":"vision","effect":"NoSchedule"}]`} {
		if got := name(gpu + inPlace); got != was {
			t.Errorf("%s renames the pool %s → %s: AKS updates it in place, a new name would replace the pool for nothing", inPlace, was, got)
		}
	}
	for _, fixed := range []string{
		strings.Replace(gpu, `"Standard_ND96asr_v4"`, `"Standard_ND96isr_H100_v5","cpus":96,"memory":"1800Gi","gpusPerNode":8,"gpuType":"nvidia-h100-80gb"`, 1), // VM size
		strings.Replace(gpu, `["1"]`, `["2"]`, 1), // zones
		gpu + `,"placement":"spread"`,             // no proximity placement group
	} {
		if got := name(fixed); got == was {
			t.Errorf("{%s} keeps the name %s: AKS cannot change it in place, and the new pool would clash with the old", fixed, got)
		}
	}
}

// TestBackupsOff: without storage.backup nothing backs up or changes the stores' own settings, so
// an upgrade adds nothing to a stack that did not ask.
func TestBackupsOff(t *testing.T) {
	for _, s := range cloudStacks {
		rec := deploy(t, cloudRaw(t, s.name, nil))
		for _, token := range []string{tEFSBackupPolicy, tFileService} {
			if n := len(rec.ofType(token)); n > 0 {
				t.Errorf("%s: %d %s without storage.backup", s.name, n, token)
			}
		}
	}
}

// TestEFSBackup: storage.backup.enabled turns the file system's automatic backups on (an EFS
// backup policy ENABLED: AWS Backup's default plan, daily, each kept 35 days:
// https://docs.aws.amazon.com/efs/latest/ug/awsbackup.html).
func TestEFSBackup(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "aws", map[string]string{"storage": `{"type":"efs","tier":"elastic","protect":true,"backup":{"enabled":true}}`}))
	bp := rec.one(t, tEFSBackupPolicy, "shared-store")
	in := inputs(bp)
	if get(in, "backupPolicy", "status") != "ENABLED" || get(in, "fileSystemId") != "shared-store-id" {
		t.Errorf("backup policy %v, want status ENABLED on the created file system (shared-store-id)", in)
	}
	if bp.Parent != "shared-store" {
		t.Errorf("backup policy's parent %s, want the store", bp.Parent)
	}
}

// TestAzureFilesSoftDelete: storage.backup.enabled turns on share soft delete for the account (a
// deleted share kept retentionDays, 7 by default, and undeletable:
// https://learn.microsoft.com/en-us/azure/storage/files/storage-files-enable-soft-delete).
func TestAzureFilesSoftDelete(t *testing.T) {
	const store = `{"type":"azurefiles","tier":"Premium","protocol":"nfs","privateEndpoint":true,"size":"1Ti","protect":true,"backup":{"enabled":true%s}}`
	for _, c := range []struct {
		extra string
		days  float64
	}{{"", 7}, {`,"retentionDays":30`, 30}} {
		rec := deploy(t, cloudRaw(t, "azure", map[string]string{"storage": strings.Replace(store, "%s", c.extra, 1)}))
		acct := get(inputs(rec.one(t, tStorageAcct, "shared-store")), "accountName")
		fs := inputs(rec.one(t, tFileService, "shared-store"))
		p := get(fs, "shareDeleteRetentionPolicy")
		if get(p, "enabled") != true || get(p, "days") != c.days || get(fs, "fileServicesName") != "default" ||
			get(fs, "accountName") != acct || get(fs, "resourceGroupName") != "kolotoc-azure-rg" {
			t.Errorf("retentionDays%s: file service %v, want share soft delete on for %v days on account %v", c.extra, fs, c.days, acct)
		}
	}
}
