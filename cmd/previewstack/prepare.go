package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"kolotoc/cmd/throwaway"
)

// previewOfKey tells the program that this stack is the preview copy of another: it names its
// objects as that stack does, and refuses `pulumi up` (stacks/preview.go).
const previewOfKey = "kolotoc:previewOf"

// PreviewConfig is the preview copy's stack file, made from the stack's (as the pull request has
// it): every plain value as it is, no secure value, no secrets-provider setting (encryptionsalt,
// encryptedkey, secretsprovider are the stack's), and kolotoc:previewOf. It returns the keys that
// were secure, which the copy gets throw-away values for.
func PreviewConfig(stackFile []byte, of string) ([]byte, []string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(stackFile, &doc); err != nil {
		return nil, nil, fmt.Errorf("Pulumi.%s.yaml: %w", of, err)
	}
	cfg, _ := doc["config"].(map[string]any)
	out := map[string]any{}
	var secure []string
	for k, v := range cfg {
		if m, ok := v.(map[string]any); ok && len(m) == 1 && m["secure"] != nil {
			secure = append(secure, k)
			continue
		}
		if path := nestedSecure(v); path != "" {
			return nil, nil, fmt.Errorf("Pulumi.%s.yaml: %s holds a secure value at %s: a preview copy cannot replace part of a value; set %s as a whole secret (pulumi config set --secret %s '<json>')", of, k, path, k, k)
		}
		out[k] = v
	}
	if _, set := out[previewOfKey]; set {
		return nil, nil, fmt.Errorf("Pulumi.%s.yaml sets %s itself: only preview copies carry it", of, previewOfKey)
	}
	out[previewOfKey] = of
	sort.Strings(secure)
	b, err := yaml.Marshal(map[string]any{"config": out})
	return b, secure, err
}

func nestedSecure(v any) string {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 && v["secure"] != nil {
			return "."
		}
		for k, x := range v {
			if p := nestedSecure(x); p != "" {
				return "." + k + strings.TrimSuffix(p, ".")
			}
		}
	case []any:
		for i, x := range v {
			if p := nestedSecure(x); p != "" {
				return fmt.Sprintf("[%d]%s", i, strings.TrimSuffix(p, "."))
			}
		}
	}
	return ""
}

// ThrowawaySecrets gives each secure key a value of the shape the program accepts, generated here
// and never the stack's: hex for passwords and seeds, a base64 account key, a password per
// registry the (plain) config names, and for the entrypoint's TLS key a throw-away certificate
// and key (the certificate, a plain value, is replaced in config, so its diff is not real: said in
// notes). given overrides keys (PREVIEW_SECRETS), e.g. a read-only kubeconfig.
func ThrowawaySecrets(config []byte, secure []string, given map[string]string) (map[string]string, []byte, []string, error) {
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return nil, nil, nil, err
	}
	secrets := map[string]string{}
	var notes []string
	for _, k := range secure {
		if v, ok := given[k]; ok {
			secrets[k] = v
			notes = append(notes, k+": from PREVIEW_SECRETS")
			continue
		}
		switch k {
		case "kolotoc:storageAccountKey":
			b := make([]byte, 64)
			if _, err := rand.Read(b); err != nil {
				return nil, nil, nil, err
			}
			secrets[k] = base64.StdEncoding.EncodeToString(b)
		case "kolotoc:registryPasswords":
			m := map[string]string{}
			regs, _ := doc.Config["kolotoc:registries"].([]any)
			for _, r := range regs {
				if rm, ok := r.(map[string]any); ok {
					if server, ok := rm["server"].(string); ok {
						p, err := throwaway.RandomHex(16)
						if err != nil {
							return nil, nil, nil, err
						}
						m[server] = p
					}
				}
			}
			b, _ := json.Marshal(m)
			secrets[k] = string(b)
		case "kolotoc:entrypointTLSKey":
			ep, _ := doc.Config["kolotoc:entrypoint"].(map[string]any)
			if ep == nil {
				return nil, nil, nil, fmt.Errorf("%s is secure but kolotoc:entrypoint has no tlsCertificate to pair a throw-away key with", k)
			}
			cert, key, err := throwaway.Certificate("preview")
			if err != nil {
				return nil, nil, nil, err
			}
			ep["tlsCertificate"] = cert
			secrets[k] = key
			notes = append(notes, "kolotoc:entrypoint.tlsCertificate: a throw-away certificate (its diff in the preview is not real)")
		default:
			v, err := throwaway.RandomHex(32)
			if err != nil {
				return nil, nil, nil, err
			}
			secrets[k] = v
		}
	}
	out, err := yaml.Marshal(map[string]any{"config": doc.Config})
	return secrets, out, notes, err
}
