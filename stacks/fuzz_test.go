package stacks_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// plaintextField is the fuzz input's one field outside the kolotoc namespace: the keys it lists
// arrive in plain text rather than as secrets (as with `pulumi config set` without --secret).
const plaintextField = "_plaintext"

// fuzzStackFiles are the committed stack files; each seeds FuzzLoad with its secrets set.
var fuzzStackFiles = []struct{ path, stack string }{
	{"../Pulumi.dev.yaml", "dev"},
	{"../Pulumi.prod.yaml", "prod"},
	{"../examples/aws/Pulumi.aws.yaml", "aws"},
	{"../examples/azure/Pulumi.azure.yaml", "azure"},
	{"../examples/workloads/Pulumi.workloads.yaml", "workloads"},
}

// encodeFuzzInput turns a Raw into FuzzLoad's input: a JSON object of every key with its value
// (objects and lists as JSON, everything else as a JSON string), plus the keys set in plain text.
func encodeFuzzInput(raw stacks.Raw) ([]byte, error) {
	doc := map[string]json.RawMessage{}
	var plain []string
	for k, v := range raw.Values {
		if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			if json.Valid([]byte(t)) {
				doc[k] = json.RawMessage(t)
				continue
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		doc[k] = b
	}
	for _, k := range stacks.SecretKeys {
		full := stacks.ConfigNamespace + ":" + k
		if _, set := raw.Values[full]; set && !raw.Secrets[full] {
			plain = append(plain, full)
		}
	}
	if len(plain) > 0 {
		b, _ := json.Marshal(plain)
		doc[plaintextField] = b
	}
	return json.Marshal(doc) // map keys sorted: a seed's bytes do not depend on map order
}

// decodeFuzzInput is the inverse: a JSON object becomes a Raw the way Pulumi hands config to the
// program (strings as they are, anything else as its JSON text). Inputs that are not a JSON
// object are not configurations and are skipped.
func decodeFuzzInput(data []byte) (stacks.Raw, bool) {
	raw := stacks.Raw{Project: "kolotoc", Stack: "fuzz", Values: map[string]string{}, Secrets: map[string]bool{}}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return raw, false
	}
	var plain []string
	if p, ok := doc[plaintextField]; ok {
		_ = json.Unmarshal(p, &plain)
		delete(doc, plaintextField)
	}
	for k, v := range doc {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			raw.Values[k] = s
		} else {
			raw.Values[k] = string(bytes.TrimSpace(v))
		}
	}
	for _, k := range stacks.SecretKeys {
		raw.Secrets[stacks.ConfigNamespace+":"+k] = true
	}
	for _, k := range plain {
		raw.Secrets[k] = false
	}
	return raw, true
}

// keyPath is a key below the namespace as FieldError names it: a top-level key, then fields, list
// indexes and quoted names (towers.command[1], nodePools[0].labels["kolotoc.dev/pool"]).
var keyPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+|\[[0-9]+\]|\["(?:[^"\\]|\\.)*"\])*$`)

// FuzzLoad: whatever the stack configuration, Load never panics; it either accepts a config that
// validates again without a problem, or refuses with a *ConfigError whose every entry names a
// key under kolotoc: — a top-level key the program knows, or the unknown key the input set.
//
//	go test -fuzz=FuzzLoad ./stacks     (the committed corpus runs with every `go test ./stacks`)
func FuzzLoad(f *testing.F) {
	for _, sf := range fuzzStackFiles {
		raw, err := stacks.ReadStackFile(sf.path, "kolotoc", sf.stack, "")
		if err != nil {
			f.Fatal(err)
		}
		withTestSecrets(raw)
		b, err := encodeFuzzInput(raw)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, ok := decodeFuzzInput(data)
		if !ok {
			return
		}
		c, err := stacks.Load(raw)
		if err == nil {
			if c == nil {
				t.Fatal("Load returned neither a config nor an error")
			}
			if errs := c.Validate(); len(errs) > 0 {
				t.Fatalf("an accepted config fails validation when checked again: %v", errs)
			}
			again := *c
			stacks.ApplyDefaults(&again)
			if !reflect.DeepEqual(&again, c) {
				t.Fatalf("applyDefaults is not idempotent on an accepted config")
			}
			_ = stacks.StorageIdentity(c)
			return
		}
		var ce *stacks.ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("rejection is a %T, not a *ConfigError: %v", err, err)
		}
		if len(ce.Errors) == 0 {
			t.Fatal("a *ConfigError without a problem in it")
		}
		for _, fe := range ce.Errors {
			// An unknown key is named as the input spelled it, whatever its characters.
			if _, setByInput := raw.Values[stacks.ConfigNamespace+":"+fe.Key]; setByInput && strings.Contains(fe.Msg, "allowed: ") {
				if known := stacks.IsConfigKey(fe.Key); !known {
					continue
				}
			}
			if !keyPath.MatchString(fe.Key) {
				t.Fatalf("problem does not name a key path: %q (%v)", fe.Key, fe)
			}
			top := fe.Key
			if i := strings.IndexAny(top, ".["); i >= 0 {
				top = top[:i]
			}
			if known := stacks.IsConfigKey(top); !known {
				t.Fatalf("problem names kolotoc:%s, under no key the program reads (%v)", fe.Key, fe)
			}
			if !strings.HasPrefix(fe.Error(), stacks.ConfigNamespace+":"+fe.Key+" = ") {
				t.Fatalf("message does not start with its key: %q", fe.Error())
			}
		}
		// No secret value is printed (unless the input also used it as a plain value elsewhere).
		for _, k := range stacks.SecretKeys {
			secret := raw.Values[stacks.ConfigNamespace+":"+k]
			if len(secret) < 8 || !raw.Secrets[stacks.ConfigNamespace+":"+k] {
				continue // too short to tell from other text, or plaintext (refused for that)
			}
			for other, v := range raw.Values {
				if other != stacks.ConfigNamespace+":"+k && strings.Contains(v, secret) {
					secret = ""
				}
			}
			if secret != "" && strings.Contains(err.Error(), secret) {
				t.Fatalf("rejection prints the value of secret kolotoc:%s: %v", k, err)
			}
		}
	})
}

// withTestSecrets sets the secrets a stack needs, as `make up` does.
func withTestSecrets(raw stacks.Raw) {
	for _, k := range stacks.SecretKeys {
		raw.Values[stacks.ConfigNamespace+":"+k] = testPassword
		raw.Secrets[stacks.ConfigNamespace+":"+k] = true
	}
	raw.Values[stacks.ConfigNamespace+":sshKeySeed"] = testSeed
	// The registries' passwords are a map of server to password (no registry here), and an
	// account key goes only with an existing SMB share, which no committed stack mounts.
	raw.Values[stacks.ConfigNamespace+":registryPasswords"] = "{}"
	delete(raw.Values, stacks.ConfigNamespace+":storageAccountKey")
}

// writeFuzzSeed adds raw to the committed corpus of FuzzLoad when KOLOTOC_WRITE_FUZZ_SEEDS=1
// (TestBadConfigs and TestFuzzSeeds call it), so that the seeds follow the stack files and the
// table of bad configs:
//
//	KOLOTOC_WRITE_FUZZ_SEEDS=1 go test ./stacks -run 'TestBadConfigs|TestFuzzSeeds'
func writeFuzzSeed(t *testing.T, name string, raw stacks.Raw) {
	t.Helper()
	if os.Getenv("KOLOTOC_WRITE_FUZZ_SEEDS") != "1" {
		return
	}
	b, err := encodeFuzzInput(raw)
	if err != nil {
		t.Fatal(err)
	}
	file := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(name), "-"), "-")
	dir := filepath.Join("testdata", "fuzz", "FuzzLoad")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFuzzSeeds: every committed stack file round-trips through FuzzLoad's encoding unchanged
// (so its seed is the stack as Load sees it), and its seed is in the committed corpus.
func TestFuzzSeeds(t *testing.T) {
	for _, sf := range fuzzStackFiles {
		t.Run(sf.stack, func(t *testing.T) {
			raw, err := stacks.ReadStackFile(sf.path, "kolotoc", sf.stack, "")
			if err != nil {
				t.Fatal(err)
			}
			withTestSecrets(raw)
			b, err := encodeFuzzInput(raw)
			if err != nil {
				t.Fatal(err)
			}
			back, ok := decodeFuzzInput(b)
			if !ok {
				t.Fatalf("seed is not a JSON object: %s", b)
			}
			for k, v := range raw.Values {
				if got := back.Values[k]; !jsonEqual(got, v) {
					t.Errorf("%s: %q after the round trip, want %q", k, got, v)
				}
			}
			writeFuzzSeed(t, "stack-"+sf.stack, raw)
			if _, err := os.Stat(filepath.Join("testdata", "fuzz", "FuzzLoad", "stack-"+sf.stack)); err != nil {
				t.Errorf("no committed seed for %s (KOLOTOC_WRITE_FUZZ_SEEDS=1 go test ./stacks -run TestFuzzSeeds): %v", sf.path, err)
			}
		})
	}
}

// jsonEqual compares two config values as JSON when both are JSON, else as text.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil {
		return reflect.DeepEqual(x, y)
	}
	return a == b
}
