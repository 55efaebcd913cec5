package tests

import (
	"slices"
	"testing"

	"kolotoc/stacks"
)

// TestOwnSecretsAreEveryRendered: every Secret the program registers is named in
// stacks.OwnSecrets, the list a workload's env may not hand out (validation refuses a
// secretKeyRef to any of them), so the list cannot go stale as a component adds a Secret.
func TestOwnSecretsAreEveryRendered(t *testing.T) {
	own := stacks.OwnSecrets()
	layouts := securityLayouts(t)
	for name, raw := range fullStacks(t) {
		layouts["full "+name] = raw
	}
	check := func(t *testing.T, rec *recorder) {
		for _, sec := range rec.ofType(tSecret) {
			if name, _ := get(inputs(sec), "metadata", "name").(string); !slices.Contains(own, name) {
				t.Errorf("Secret %s (%s) is not in stacks.OwnSecrets %v", name, sec.Name, own)
			}
		}
	}
	for name, raw := range layouts {
		t.Run(name, func(t *testing.T) { check(t, deploy(t, raw)) })
	}
	// The store's mount credentials: an SMB Azure Files share.
	t.Run("azure smb", func(t *testing.T) {
		check(t, cloudRec(t, "azure", map[string]string{"storage": `{"type":"azurefiles","protocol":"smb"}`}))
	})
}
