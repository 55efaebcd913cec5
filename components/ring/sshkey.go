package ring

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/pem"
	"errors"

	"golang.org/x/crypto/ssh"
)

// sshKeyDomain separates this derivation from any other use of the same seed.
const sshKeyDomain = "kolotoc/ring/ssh-ed25519/v1\x00"

// DeriveSSHKey derives the towers' ed25519 key pair from the secret seed. The same seed always
// gives the same bytes (no randomness anywhere, unlike ssh.MarshalPrivateKey, whose check word is
// random), so a second `pulumi up` sees the same Secret and changes nothing. Rotating the seed
// rotates the key.
func DeriveSSHKey(seed string) (privatePEM, authorizedKey string, err error) {
	if seed == "" {
		return "", "", errors.New("ssh key seed is empty")
	}
	h := sha256.Sum256([]byte(sshKeyDomain + seed))
	priv := ed25519.NewKeyFromSeed(h[:])
	pub := priv.Public().(ed25519.PublicKey)
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", "", err
	}
	block := &pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: marshalOpenSSHEd25519(priv, pub, binary.BigEndian.Uint32(h[:4]))}
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
