package ring

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// testSeed is 32 bytes (sha256 of "kolotoc test seed"), hex-encoded.
const testSeed = "4cb085380e5f9d8f58cea32480fb882e55eaab5516bd7148cd01c02c3597e20e"

var devBinding = Binding{Project: "kolotoc", Stack: "dev", Namespace: "kolotoc-dev"}

// TestDeriveSSHKey: the key pair is deterministic, valid for OpenSSH, depends on the seed's bytes
// (not their encoding), and is bound to project, stack and namespace: a seed copied from one stack
// to another gives an unrelated key.
func TestDeriveSSHKey(t *testing.T) {
	priv, pub, err := DeriveSSHKey(testSeed, devBinding)
	if err != nil {
		t.Fatal(err)
	}
	again, _, _ := DeriveSSHKey(testSeed, devBinding)
	if again != priv {
		t.Error("two derivations from the same inputs differ: a second pulumi up would change the Secret")
	}
	key, err := ssh.ParseRawPrivateKey([]byte(priv))
	if err != nil {
		t.Fatalf("OpenSSH cannot read the private key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ssh.MarshalAuthorizedKey(signer.PublicKey())); got != pub {
		t.Errorf("authorized key %q is not the private key's %q", pub, got)
	}
	if _, ok := key.(*ed25519.PrivateKey); !ok {
		t.Errorf("key type %T, want ed25519", key)
	}

	raw, _ := hex.DecodeString(testSeed)
	if p, _, err := DeriveSSHKey(base64.StdEncoding.EncodeToString(raw), devBinding); err != nil || p != priv {
		t.Errorf("the same 32 bytes in base64 gave another key (err %v)", err)
	}
	seen := map[string]string{priv: "dev"}
	for name, b := range map[string]Binding{
		"prod stack":      {Project: "kolotoc", Stack: "prod", Namespace: "kolotoc-dev"},
		"other namespace": {Project: "kolotoc", Stack: "dev", Namespace: "kolotoc-prod"},
		"other project":   {Project: "kolotoc2", Stack: "dev", Namespace: "kolotoc-dev"},
		// A separator between the fields: "a"+"bc" and "ab"+"c" must not collide.
		"shifted fields": {Project: "kolotocd", Stack: "ev", Namespace: "kolotoc-dev"},
	} {
		p, _, err := DeriveSSHKey(testSeed, b)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[p]; dup {
			t.Errorf("%s gives the same key as %s", name, other)
		}
		seen[p] = name
	}
	if _, _, err := DeriveSSHKey(testSeed, Binding{Project: "kolotoc", Stack: "dev"}); err == nil {
		t.Error("a key without its namespace binding was derived")
	}
}

// TestSeedStrength: seeds under 256 bits, made-up ones and passphrases are refused, without
// the seed in the message.
func TestSeedStrength(t *testing.T) {
	raw, _ := hex.DecodeString(testSeed)
	for _, ok := range []string{testSeed, strings.ToUpper(testSeed), base64.StdEncoding.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(raw), testSeed + testSeed, " " + testSeed + "\n"} {
		if _, err := SeedBytes(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for seed, want := range map[string]string{
		"":                                   "empty",
		testSeed[:62]:                        "248 bits, fewer than 256",
		strings.Repeat("00", 32):             "only 1 distinct values",
		strings.Repeat("0123456789", 7)[:64]: "only 5 distinct values",
		"correct horse battery staple and more words to be long": "neither hex nor base64",
	} {
		_, err := SeedBytes(seed)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("seed %q: error %v, want %q", seed, err, want)
		}
		if err != nil && seed != "" && strings.Contains(err.Error(), seed) {
			t.Errorf("error %q contains the seed", err)
		}
	}
}
