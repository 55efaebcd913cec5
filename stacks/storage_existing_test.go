package stacks_test

import (
	"errors"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	"kolotoc/stacks/clouds/aws"
	"kolotoc/stacks/clouds/azure"
	_ "kolotoc/stacks/workloads"
	"strings"
	"testing"
)

const (
	existingFS  = "fs-0123456789abcdef0"
	existingAP  = "fsap-0fedcba9876543210"
	existingKey = "hunter2-storage-account-key"
)

// existingRaw is a cloud example with its storage (and other keys) replaced.
func existingRaw(t *testing.T, stack string, set map[string]string, secrets ...string) stacks.Raw {
	t.Helper()
	path := map[string]string{"aws": "../examples/aws/Pulumi.aws.yaml", "azure": "../examples/azure/Pulumi.azure.yaml", "prod": "../Pulumi.prod.yaml"}[stack]
	raw := exampleRaw(t, path, stack)
	for k, v := range set {
		raw.Values["kolotoc:"+k] = v
	}
	for _, k := range secrets {
		raw.Secrets["kolotoc:"+k] = true
	}
	return raw
}

// TestExistingStoresAccepted: an existing EFS file system, Azure Files share or NFS export is
// accepted on its cloud and on an existing cluster, is an existing store (its volume is kept),
// and has nothing of a created store defaulted into it.
func TestExistingStoresAccepted(t *testing.T) {
	existing := `{"kubeconfig":"/tmp/kubeconfig"}`
	for _, tc := range []struct {
		name, stack string
		set         map[string]string
		secrets     []string
		check       func(t *testing.T, c *stacks.Config)
	}{
		{name: "efs on aws", stack: "aws", set: map[string]string{"storage": `{"type":"efs","fileSystemId":"` + existingFS + `","protect":true}`},
			check: func(t *testing.T, c *stacks.Config) {
				if c.Storage.Tier != "" || aws.EFSVolumeHandle(c.Storage) != existingFS {
					t.Errorf("tier %q handle %q, want no tier and %s", c.Storage.Tier, aws.EFSVolumeHandle(c.Storage), existingFS)
				}
			}},
		{name: "efs access point and subdirectory on an existing cluster", stack: "aws",
			set: map[string]string{"cloud": "existing", "cluster": existing, "storage": `{"type":"efs","fileSystemId":"` + existingFS + `","accessPointId":"` + existingAP + `","path":"/runs"}`},
			check: func(t *testing.T, c *stacks.Config) {
				if got, want := aws.EFSVolumeHandle(c.Storage), existingFS+":/runs:"+existingAP; got != want {
					t.Errorf("handle %q, want %q", got, want)
				}
			}},
		{name: "efs access point alone", stack: "aws", set: map[string]string{"storage": `{"type":"efs","fileSystemId":"` + existingFS + `","accessPointId":"` + existingAP + `"}`},
			check: func(t *testing.T, c *stacks.Config) {
				if got, want := aws.EFSVolumeHandle(c.Storage), existingFS+"::"+existingAP; got != want {
					t.Errorf("handle %q, want %q", got, want)
				}
			}},
		{name: "smb share on azure", stack: "azure",
			set:     map[string]string{"storage": `{"type":"azurefiles","share":"checkpoints","account":"mldata","resourceGroup":"ml-data","protocol":"smb"}`, "storageAccountKey": existingKey},
			secrets: []string{"storageAccountKey"},
			check: func(t *testing.T, c *stacks.Config) {
				if s := c.Storage; s.Tier != "" || s.Account != "mldata" || s.Protocol != azure.AzureFilesSMB {
					t.Errorf("storage %+v: want no tier, the named account and smb", s)
				}
			}},
		{name: "nfs share on an existing cluster", stack: "azure",
			set: map[string]string{"cloud": "existing", "cluster": existing, "storage": `{"type":"azurefiles","share":"checkpoints","account":"mldata","resourceGroup":"ml-data","protocol":"nfs"}`}},
		{name: "nfs export on an existing cluster", stack: "azure",
			set: map[string]string{"cloud": "existing", "cluster": existing, "storage": `{"type":"nfs","server":"10.0.0.2","path":"/exports","mountOptions":["nfsvers=3","hard"]}`}},
		{name: "nfs export on gcp (an existing Filestore)", stack: "prod",
			set: map[string]string{"storage": `{"type":"nfs","server":"10.20.0.2","path":"/shared","mountOptions":["nfsvers=3"],"protect":true}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := stacks.Load(existingRaw(t, tc.stack, tc.set, tc.secrets...))
			if err != nil {
				t.Fatal(err)
			}
			if !c.ExistingStore() {
				t.Error("not an existing store: its volume would not be kept")
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// TestExistingStoreGuard: with protect, moving from a created file store to an existing one, or
// from one existing store to another, is refused naming the keys; an unchanged one passes.
func TestExistingStoreGuard(t *testing.T) {
	load := func(t *testing.T, stack, storage string, secrets ...string) *stacks.Config {
		t.Helper()
		set := map[string]string{"storage": storage}
		if len(secrets) > 0 {
			set["storageAccountKey"] = existingKey
		}
		c, err := stacks.Load(existingRaw(t, stack, set, secrets...))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	efs := func(fs, extra string) string {
		return `{"type":"efs","fileSystemId":"` + fs + `","protect":true` + extra + `}`
	}
	share := func(name string) string {
		return `{"type":"azurefiles","share":"` + name + `","account":"mldata","resourceGroup":"ml-data","protocol":"smb","protect":true}`
	}
	created, _ := stacks.Load(exampleRaw(t, "../examples/aws/Pulumi.aws.yaml", "aws"))
	for _, tc := range []struct {
		name     string
		previous map[string]string
		now      *stacks.Config
		wantKeys string
	}{
		{name: "created EFS to an existing one", previous: stacks.RecordedIdentity(created, nil), now: load(t, "aws", efs(existingFS, "")),
			wantKeys: "storage.fileSystemId storage.path"},
		{name: "another file system", previous: stacks.RecordedIdentity(load(t, "aws", efs(existingFS, "")), nil), now: load(t, "aws", efs("fs-12345678", "")),
			wantKeys: "storage.fileSystemId"},
		{name: "an access point added", previous: stacks.RecordedIdentity(load(t, "aws", efs(existingFS, "")), nil),
			now: load(t, "aws", efs(existingFS, `,"accessPointId":"`+existingAP+`"`)), wantKeys: "storage.accessPointId"},
		{name: "the same file system", previous: stacks.RecordedIdentity(load(t, "aws", efs(existingFS, "")), nil), now: load(t, "aws", efs(existingFS, ""))},
		{name: "another share", previous: stacks.RecordedIdentity(load(t, "azure", share("checkpoints"), "storageAccountKey"), nil),
			now: load(t, "azure", share("results"), "storageAccountKey"), wantKeys: "storage.share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := stacks.CheckStorageReplacement(tc.now, tc.previous)
			if tc.wantKeys == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *stacks.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a refusal naming %s, got %v", tc.wantKeys, err)
			}
			var got []string
			for _, fe := range ce.Errors {
				got = append(got, fe.Key)
			}
			if strings.Join(got, " ") != tc.wantKeys {
				t.Errorf("keys %v, want %s", got, tc.wantKeys)
			}
		})
	}
}
