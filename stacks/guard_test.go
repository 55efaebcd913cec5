package stacks_test

import (
	"errors"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"strings"
	"testing"

	"kolotoc/components/storage"
)

// TestStorageReplacementGuard: once protected storage is deployed, a change of any key that
// replaces it is refused with every such key named, unless storage.allowReplace is set; other
// changes, unprotected storage and a first deployment pass.
func TestStorageReplacementGuard(t *testing.T) {
	load := func(t *testing.T, path, stack string, set map[string]string) *stacks.Config {
		t.Helper()
		raw := exampleRaw(t, path, stack)
		for k, v := range set {
			raw.Values["kolotoc:"+k] = v
		}
		c, err := stacks.Load(raw)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	prod := func(t *testing.T, set map[string]string) *stacks.Config {
		return load(t, "../Pulumi.prod.yaml", "prod", set)
	}
	deployed := stacks.StorageIdentity(prod(t, nil))
	if deployed["storage.protect"] != "true" || deployed["storage.type"] != storage.TypeFilestore || deployed["storage.zone"] != "us-central1-a" {
		t.Fatalf("prod's identity: %v", deployed)
	}

	cases := []struct {
		name     string
		previous map[string]string
		set      map[string]string
		wantKeys []string // nil: accepted
	}{
		{name: "nothing changed", previous: deployed},
		{name: "first deployment", previous: nil, set: map[string]string{"storage": `{"type":"filestore","tier":"REGIONAL","size":"1Ti","protect":true}`}},
		{name: "size grows in place", previous: deployed, set: map[string]string{"storage": `{"type":"filestore","tier":"ZONAL","size":"4Ti","protect":true}`}},
		{name: "a workload change", previous: deployed, set: map[string]string{"towers": `{"count":4,"gpusPerTower":8,"pool":"gpu"}`}},
		{name: "tier", previous: deployed, set: map[string]string{"storage": `{"type":"filestore","tier":"REGIONAL","size":"2Ti","protect":true}`}, wantKeys: []string{"storage.tier", "storage.zone"}},
		{name: "tier with protect turned off in the same change", previous: deployed, set: map[string]string{"storage": `{"type":"filestore","tier":"REGIONAL","size":"2Ti"}`}, wantKeys: []string{"storage.tier", "storage.zone"}},
		{name: "type", previous: deployed, set: map[string]string{"storage": `{"type":"nfs","server":"10.0.0.2","protect":true}`}, wantKeys: []string{"cluster.network", "cluster.region", "storage.path", "storage.server", "storage.tier", "storage.type", "storage.zone"}},
		{name: "namespace", previous: deployed, set: map[string]string{"namespace": "ml-prod"}, wantKeys: []string{"namespace"}},
		{name: "override", previous: deployed, set: map[string]string{"storage": `{"type":"nfs","server":"10.0.0.2","allowReplace":true}`}},
		{name: "unprotected storage", previous: map[string]string{"storage.protect": "false", "storage.type": "filestore", "storage.tier": "ZONAL"}, set: map[string]string{"storage": `{"type":"filestore","tier":"REGIONAL","size":"2Ti"}`}},
	}
	// What the updates before recorded, through RecordedIdentity as the program records it.
	unprotect := `{"type":"filestore","tier":"ZONAL","size":"2Ti"}`
	afterUnprotect := stacks.RecordedIdentity(prod(t, map[string]string{"storage": unprotect}), deployed)
	afterOverride := stacks.RecordedIdentity(prod(t, map[string]string{"storage": `{"type":"nfs","server":"10.0.0.2","allowReplace":true}`}), deployed)
	cases = append(cases, []struct {
		name     string
		previous map[string]string
		set      map[string]string
		wantKeys []string
	}{
		// Protect turned off in one update, the storage replaced in the next: still refused.
		{name: "tier after an update that turned protect off", previous: afterUnprotect,
			set: map[string]string{"storage": `{"type":"filestore","tier":"REGIONAL","size":"2Ti"}`}, wantKeys: []string{"storage.tier", "storage.zone"}},
		{name: "a workload change after protect was turned off", previous: afterUnprotect, set: map[string]string{"namespace": "kolotoc-prod"}},
		// allowReplace lets one update through; left set, the next is refused until it goes.
		{name: "allowReplace left set", previous: afterOverride,
			set: map[string]string{"storage": `{"type":"nfs","server":"10.0.0.3","allowReplace":true}`}, wantKeys: []string{"storage.allowReplace"}},
		{name: "allowReplace removed after use", previous: afterOverride, set: map[string]string{"storage": `{"type":"nfs","server":"10.0.0.2"}`}},
	}...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := stacks.CheckStorageReplacement(prod(t, tc.set), tc.previous)
			if tc.wantKeys == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *stacks.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *ConfigError naming %v, got %v", tc.wantKeys, err)
			}
			var got []string
			for _, fe := range ce.Errors {
				got = append(got, fe.Key)
			}
			if strings.Join(got, " ") != strings.Join(tc.wantKeys, " ") {
				t.Errorf("keys %v, want %v", got, tc.wantKeys)
			}
			wants := []string{"kolotoc:" + tc.wantKeys[0], "was ", "kolotoc:storage.allowReplace: true", "kolotoc:storage.protect: false", "nothing was changed"}
			if tc.wantKeys[0] == "storage.allowReplace" {
				wants = []string{"kolotoc:storage.allowReplace = true", "already let the last update through; remove it", "nothing was changed"}
			}
			for _, want := range wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestStorageIdentityPerType: each storage type records the keys that replace it and no other.
func TestStorageIdentityPerType(t *testing.T) {
	for _, f := range cloudFiles {
		t.Run(f.stack, func(t *testing.T) {
			c, err := stacks.Load(exampleRaw(t, f.path, f.stack))
			if err != nil {
				t.Fatal(err)
			}
			id := stacks.StorageIdentity(c)
			want := map[string][]string{
				storage.TypeFilestore:  {"cluster.network", "cluster.project", "cluster.region", "storage.tier", "storage.zone"},
				storage.TypeEFS:        {"cluster.region"},
				storage.TypeAzureFiles: {"cluster.region", "storage.account", "storage.protocol", "storage.tier"}, // the example's share is NFS
			}[f.storage]
			for _, k := range append(want, "cloud", "cluster.name", "namespace", "storage.type", "storage.protect") {
				if _, ok := id[k]; !ok {
					t.Errorf("identity lacks %s: %v", k, id)
				}
			}
			if len(id) != len(want)+5 {
				t.Errorf("identity has keys beyond %v: %v", want, id)
			}
		})
	}
}
