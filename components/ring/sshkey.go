package ring

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// sshKeyInfo is HKDF's info for the towers' key: it separates this derivation from any other use
// of the seed; the key's binding (project, stack, namespace) follows it.
const sshKeyInfo = "kolotoc/ring/ssh-ed25519/v2"

// MinSeedBytes is the least a seed must decode to: 256 bits.
const MinSeedBytes = 32

// minSeedDistinct is the least number of distinct byte values among a seed's bytes. 32 random
// bytes have about 30; fewer than 16 has a chance below 2^-40 and marks a made-up seed
// ("0000…", "abab…") whose length says nothing of its strength.
const minSeedDistinct = 16

// Binding is what a key is bound to: the same seed gives unrelated keys in another project,
// stack or namespace, so a seed copied from dev to prod does not hand prod's towers dev's key.
type Binding struct {
	Project, Stack, Namespace string
}

// SeedBytes decodes a seed: hex (as `openssl rand -hex 32` prints) or base64 (`openssl rand
// -base64 32`), at least MinSeedBytes bytes that do not repeat a few values. The error never
// contains the seed.
func SeedBytes(seed string) ([]byte, error) {
	seed = strings.TrimSpace(seed)
	if seed == "" {
		return nil, errors.New("empty")
	}
	b, err := hex.DecodeString(seed)
	if err != nil {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err = enc.DecodeString(seed); err == nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("neither hex nor base64 (%d characters)", len(seed))
	}
	if len(b) < MinSeedBytes {
		return nil, fmt.Errorf("%d bits, fewer than %d", 8*len(b), 8*MinSeedBytes)
	}
	distinct := map[byte]bool{}
	for _, c := range b {
		distinct[c] = true
	}
	if len(distinct) < minSeedDistinct {
		return nil, fmt.Errorf("%d bytes but only %d distinct values: not random", len(b), len(distinct))
	}
	return b, nil
}

// DeriveSSHKey derives the towers' ed25519 key pair from the secret seed with HKDF-SHA256 (RFC
// 5869), bound to the project, stack and namespace. The same inputs always give the same bytes
// (no randomness anywhere, unlike ssh.MarshalPrivateKey, whose check word is random), so a second
// `pulumi up` sees the same Secret and changes nothing. Rotating the seed rotates the key.
func DeriveSSHKey(seed string, bind Binding) (privatePEM, authorizedKey string, err error) {
	secret, err := SeedBytes(seed)
	if err != nil {
		return "", "", fmt.Errorf("ssh key seed: %w", err)
	}
	if bind.Project == "" || bind.Stack == "" || bind.Namespace == "" {
		return "", "", fmt.Errorf("ssh key binding %+v: project, stack and namespace are required", bind)
	}
	info := strings.Join([]string{sshKeyInfo, bind.Project, bind.Stack, bind.Namespace}, "\x00")
	okm, err := hkdf.Key(sha256.New, secret, nil, info, ed25519.SeedSize+4)
	if err != nil {
		return "", "", fmt.Errorf("ssh key derivation: %w", err)
	}
	priv := ed25519.NewKeyFromSeed(okm[:ed25519.SeedSize])
	pub := priv.Public().(ed25519.PublicKey)
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", "", fmt.Errorf("ssh public key: %w", err)
	}
	check := binary.BigEndian.Uint32(okm[ed25519.SeedSize:])
	block := &pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: marshalOpenSSHEd25519(priv, pub, check)}
	return string(pem.EncodeToMemory(block)), string(ssh.MarshalAuthorizedKey(sshPub)), nil
}

// marshalOpenSSHEd25519 encodes an unencrypted "openssh-key-v1" private key (PROTOCOL.key in
// OpenSSH) with a deterministic check word.
func marshalOpenSSHEd25519(priv ed25519.PrivateKey, pub ed25519.PublicKey, check uint32) []byte {
	str := func(b []byte) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
		return append(out, b...)
	}
	pubBlob := append(str([]byte(ssh.KeyAlgoED25519)), str(pub)...)

	var inner []byte
	inner = binary.BigEndian.AppendUint32(inner, check)
	inner = binary.BigEndian.AppendUint32(inner, check)
	inner = append(inner, str([]byte(ssh.KeyAlgoED25519))...)
	inner = append(inner, str(pub)...)
	inner = append(inner, str(priv)...) // 64 bytes: seed || public key, as OpenSSH stores it
	inner = append(inner, str([]byte("kolotoc-towers"))...)
	for i := byte(1); len(inner)%8 != 0; i++ { // pad to the cipher block size (8 for "none")
		inner = append(inner, i)
	}

	out := []byte("openssh-key-v1\x00")
	out = append(out, str([]byte("none"))...) // cipher
	out = append(out, str([]byte("none"))...) // kdf
	out = append(out, str(nil)...)            // kdf options
	out = binary.BigEndian.AppendUint32(out, 1)
	out = append(out, str(pubBlob)...)
	return append(out, str(inner)...)
}
