package main

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const prodFile = `secretsprovider: passphrase
encryptionsalt: v1:STACK-SALT
config:
  kolotoc:cloud: gcp
  kolotoc:jupyterPassword:
    secure: v1:AAAA
  kolotoc:sshKeySeed:
    secure: v1:BBBB
  kolotoc:registryPasswords:
    secure: v1:CCCC
  kolotoc:storageAccountKey:
    secure: v1:DDDD
  kolotoc:registries:
    - server: ghcr.io
      username: bot
  kolotoc:entrypoint:
    tlsCertificate: REAL-CERT
  kolotoc:entrypointTLSKey:
    secure: v1:EEEE
`

func TestPreviewConfigKeepsPlainValuesOnly(t *testing.T) {
	cfg, secure, err := PreviewConfig([]byte(prodFile), "prod")
	if err != nil {
		t.Fatal(err)
	}
	text := string(cfg)
	for _, leak := range []string{"STACK-SALT", "secure", "v1:", "secretsprovider"} {
		if strings.Contains(text, leak) {
			t.Errorf("the copy's stack file holds %q:\n%s", leak, text)
		}
	}
	if !strings.Contains(text, "kolotoc:previewOf: prod") || !strings.Contains(text, "kolotoc:cloud: gcp") {
		t.Errorf("stack file:\n%s", text)
	}
	want := "kolotoc:entrypointTLSKey kolotoc:jupyterPassword kolotoc:registryPasswords kolotoc:sshKeySeed kolotoc:storageAccountKey"
	if got := strings.Join(secure, " "); got != want {
		t.Errorf("secure keys %s, want %s", got, want)
	}

	secrets, cfg, notes, err := ThrowawaySecrets(cfg, secure, map[string]string{"kolotoc:sshKeySeed": "GIVEN"})
	if err != nil {
		t.Fatal(err)
	}
	if secrets["kolotoc:sshKeySeed"] != "GIVEN" || len(secrets["kolotoc:jupyterPassword"]) != 64 {
		t.Errorf("secrets %v", secrets)
	}
	var regs map[string]string
	if err := json.Unmarshal([]byte(secrets["kolotoc:registryPasswords"]), &regs); err != nil || len(regs) != 1 || regs["ghcr.io"] == "" {
		t.Errorf("registryPasswords %v (%v): want one per registry the stack names", regs, err)
	}
	if k, err := base64.StdEncoding.DecodeString(secrets["kolotoc:storageAccountKey"]); err != nil || len(k) != 64 {
		t.Errorf("storageAccountKey: %d bytes (%v), want a 64-byte base64 key as Azure's", len(k), err)
	}
	// The entrypoint's certificate is replaced by one its throw-away key matches.
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		t.Fatal(err)
	}
	cert := doc.Config["kolotoc:entrypoint"].(map[string]any)["tlsCertificate"].(string)
	if _, err := tls.X509KeyPair([]byte(cert), []byte(secrets["kolotoc:entrypointTLSKey"])); err != nil {
		t.Errorf("throw-away certificate and key: %v", err)
	}
	if len(notes) != 2 {
		t.Errorf("notes %v: want the given key and the certificate said", notes)
	}
}

func TestPreviewConfigRefusals(t *testing.T) {
	for name, file := range map[string]string{
		"a nested secure value": "config:\n  kolotoc:entrypoint:\n    tls:\n      secure: v1:X\n",
		"previewOf already set": "config:\n  kolotoc:previewOf: other\n",
	} {
		if _, _, err := PreviewConfig([]byte(file), "prod"); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "kolotoc:") {
			t.Errorf("%s: error %q names no key", name, err)
		}
	}
}
