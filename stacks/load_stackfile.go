package stacks

import (
	"encoding/json"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// ReadStackFile reads a Pulumi.<stack>.yaml into the Raw form the program receives, for tests and
// for checking stack files without the Pulumi CLI. Values stored encrypted (`secure:`) cannot be
// decrypted here: they are returned as present and secret, with the placeholder value given.
func ReadStackFile(path, project, stack, securePlaceholder string) (Raw, error) {
	raw := Raw{Project: project, Stack: stack, Values: map[string]string{}, Secrets: map[string]bool{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return raw, err
	}
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return raw, fmt.Errorf("%s: %w", path, err)
	}
	for k, v := range doc.Config {
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			if _, secure := m["secure"]; secure {
				raw.Values[k] = securePlaceholder
				raw.Secrets[k] = true
				continue
			}
		}
		switch v := v.(type) {
		case string:
			raw.Values[k] = v
		case map[string]any, []any:
			j, err := json.Marshal(v)
			if err != nil {
				return raw, fmt.Errorf("%s: %s: %w", path, k, err)
			}
			raw.Values[k] = string(j)
		default:
			raw.Values[k] = fmt.Sprint(v)
		}
	}
	return raw, nil
}
