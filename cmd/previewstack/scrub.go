package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// How a deployment (`pulumi stack export`, version 3) marks a secret: an object holding this key
// with this value, and either "ciphertext" or, exported with --show-secrets, "plaintext" (the
// value, JSON-encoded). pulumi/pulumi sdk/go/common/apitype (SecretSig) and resource/stack.
const (
	secretSigKey   = "4dabf18193072939515e22adb298388d"
	secretSigValue = "1b47061264138c4ac30d75fd1eb44270"
)

// Placeholder is what every secret of the stack becomes in its preview copy.
const Placeholder = "[scrubbed: a preview copy holds no secret]"

// Report counts what Scrub changed.
type Report struct {
	Resources   int // resources copied
	Secrets     int // secret values replaced by Placeholder
	Kubeconfigs int // kubeconfigs kept with their users' credentials removed
	Pending     int // pending operations of the stack, left out of the copy
}

// Scrub turns the stack's deployment, exported with --show-secrets, into its preview copy's:
//   - every secret value becomes Placeholder, except a kubeconfig, which keeps its clusters and
//     contexts (the Kubernetes provider must still parse it, and a cloud's exec-plugin kubeconfig,
//     which holds no credential, stays byte for byte the same, so the provider shows no diff)
//     but loses every credential of its users;
//   - URNs name the copy (urn:pulumi:<from>:: → urn:pulumi:<to>::, and the root stack resource
//     <project>-<from> → <project>-<to>), as `pulumi stack import` requires;
//   - the secrets provider is the copy's own (taken from target, the copy's own export), so the
//     copy is encrypted with the copy's passphrase and never with the stack's;
//   - pending operations are dropped: they are the stack's to clear, not the preview's.
func Scrub(deployment, target []byte, from, to string) ([]byte, Report, error) {
	var rep Report
	src, err := decodeDeployment(deployment, "the stack's export")
	if err != nil {
		return nil, rep, err
	}
	dst, err := decodeDeployment(target, "the preview copy's export")
	if err != nil {
		return nil, rep, err
	}
	sp, ok := dst["secrets_providers"]
	if !ok {
		return nil, rep, errors.New("the preview copy's export has no secrets provider: create the copy with `pulumi stack init` first")
	}
	src["secrets_providers"] = sp
	if ops, ok := src["pending_operations"].([]any); ok {
		rep.Pending = len(ops)
	}
	delete(src, "pending_operations")
	resources, _ := src["resources"].([]any)
	rep.Resources = len(resources)

	s := scrubber{from: "urn:pulumi:" + from + "::", to: "urn:pulumi:" + to + "::", fromStack: from, toStack: to, rep: &rep}
	out, err := s.walk(src)
	if err != nil {
		return nil, rep, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"version": json.Number("3"), "deployment": out}); err != nil {
		return nil, rep, err
	}
	return buf.Bytes(), rep, nil
}

func decodeDeployment(b []byte, what string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc struct {
		Version    json.Number    `json:"version"`
		Deployment map[string]any `json:"deployment"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if doc.Version != "3" {
		return nil, fmt.Errorf("%s: deployment version %q, want 3", what, doc.Version)
	}
	if doc.Deployment == nil {
		return nil, fmt.Errorf("%s: no deployment", what)
	}
	return doc.Deployment, nil
}

type scrubber struct {
	from, to           string // URN prefixes
	fromStack, toStack string
	rep                *Report
}

func (s scrubber) walk(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if v[secretSigKey] == secretSigValue {
			return s.secret(v)
		}
		for k, x := range v {
			y, err := s.walk(x)
			if err != nil {
				return nil, err
			}
			v[k] = y
		}
		return v, nil
	case []any:
		for i, x := range v {
			y, err := s.walk(x)
			if err != nil {
				return nil, err
			}
			v[i] = y
		}
		return v, nil
	case string:
		return s.urn(v), nil
	default:
		return v, nil
	}
}

// urn renames a URN (or a provider reference, "<urn>::<id>") of the stack to the copy's.
func (s scrubber) urn(v string) string {
	if !strings.HasPrefix(v, s.from) {
		return v
	}
	v = s.to + v[len(s.from):]
	// urn:pulumi:<stack>::<project>::pulumi:pulumi:Stack::<project>-<stack>: the root resource.
	parts := strings.SplitN(v, "::", 4)
	if len(parts) == 4 && parts[2] == "pulumi:pulumi:Stack" {
		if name, rest, _ := strings.Cut(parts[3], "::"); name == parts[1]+"-"+s.fromStack {
			parts[3] = parts[1] + "-" + s.toStack
			if rest != "" {
				parts[3] += "::" + rest
			}
			v = strings.Join(parts, "::")
		}
	}
	return v
}

func (s scrubber) secret(v map[string]any) (any, error) {
	plain, ok := v["plaintext"].(string)
	if !ok {
		return nil, errors.New("the stack's export holds an encrypted secret: export it with `pulumi stack export --show-secrets`")
	}
	var value any
	if err := json.Unmarshal([]byte(plain), &value); err == nil {
		if str, ok := value.(string); ok {
			if kc, changed, ok := stripKubeconfig(str); ok {
				s.rep.Kubeconfigs++
				if !changed {
					return v, nil
				}
				b, err := json.Marshal(kc)
				if err != nil {
					return nil, err
				}
				return map[string]any{secretSigKey: secretSigValue, "plaintext": string(b)}, nil
			}
		}
	}
	s.rep.Secrets++
	b, _ := json.Marshal(Placeholder)
	return map[string]any{secretSigKey: secretSigValue, "plaintext": string(b)}, nil
}

// Fields of a kubeconfig user that are credentials (k8s.io/client-go/tools/clientcmd/api/v1
// AuthInfo): all but the exec plugin, whose command, arguments and API version say how to sign
// in without holding anything secret; its env values may hold one, so they are replaced.
var userKept = map[string]bool{"exec": true}

// stripKubeconfig reports whether s is a kubeconfig and, if it is, returns it with every user's
// credentials removed (changed: something was removed; otherwise s itself is kept).
func stripKubeconfig(s string) (string, bool, bool) {
	if !strings.Contains(s, "clusters") || !strings.Contains(s, "Config") {
		return "", false, false
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil || doc["kind"] != "Config" {
		return "", false, false
	}
	changed := false
	users, _ := doc["users"].([]any)
	for _, u := range users {
		um, _ := u.(map[string]any)
		user, _ := um["user"].(map[string]any)
		for k := range user {
			if !userKept[k] {
				delete(user, k)
				changed = true
			}
		}
		if exec, ok := user["exec"].(map[string]any); ok {
			envs, _ := exec["env"].([]any)
			for _, e := range envs {
				if em, ok := e.(map[string]any); ok && em["value"] != nil && em["value"] != Placeholder {
					em["value"] = Placeholder
					changed = true
				}
			}
		}
	}
	if !changed {
		return s, false, true
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", false, false
	}
	return string(out), true, true
}
