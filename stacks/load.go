package stacks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"kolotoc/components/meta"
)

// Raw is a stack's configuration as Pulumi hands it to the program: every `kolotoc:*` key with its
// value (objects and lists as JSON text, secrets decrypted), and which keys were set as secrets.
type Raw struct {
	Project string
	Stack   string
	Values  map[string]string // "kolotoc:towers" -> `{"count":2}`
	Secrets map[string]bool   // keys set with `pulumi config set --secret`
}

// Load decodes, defaults and validates a stack's configuration. The error lists every problem at
// once, each naming its key; nothing is registered before Load has returned without error.
func Load(raw Raw) (*Config, error) {
	c := newConfig(raw.Project, raw.Stack)
	var errs []FieldError

	keys := make([]string, 0, len(raw.Values))
	for k := range raw.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, full := range keys {
		ns, key, ok := strings.Cut(full, ":")
		if !ok || ns != ConfigNamespace {
			continue // other packages' keys (gcp:project, kubernetes:…) are not ours
		}
		k, known := configKeys[key] // a key outside Config's tags is refused: a typo (kolotoc:tower) is an error, not a setting ignored
		if !known {
			what := "unknown key"
			if key == "" {
				what = "a key with no name"
			}
			errs = append(errs, FieldError{Key: key, Value: "(set)",
				Msg: what + "; allowed: " + strings.Join(meta.SortedKeys(configKeys), ", ")})
			continue
		}
		if d, ok := projectDefaults[key]; ok && raw.Values[full] == d {
			continue // Pulumi.yaml's default for a key the stack leaves unset (keys.go): unset
		}
		errs = append(errs, k.decode(c, key, raw.Values[full])...)
	}
	for _, k := range secretKeys {
		full := ConfigNamespace + ":" + k
		if v, set := raw.Values[full]; set && !raw.Secrets[full] && v != projectDefaults[k] {
			errs = append(errs, FieldError{Key: k, Value: "(plaintext)",
				Msg: fmt.Sprintf("must be a secret; run `pulumi config set --secret %s <value>`", full)})
		}
	}
	if len(errs) > 0 {
		return nil, &ConfigError{Stack: raw.Stack, Errors: errs}
	}

	shapes := c.validateShapes() // before defaults: only a shape the stack gives counts
	c.applyDefaults()
	if errs := append(shapes, c.Validate()...); len(errs) > 0 {
		return nil, &ConfigError{Stack: raw.Stack, Errors: errs}
	}
	return c, nil
}

// newConfig is a Config whose switches that default to on are on; decoding then only turns off
// what the stack turns off, and absent keys keep their default.
func newConfig(project, stack string) *Config {
	c := &Config{Project: project, Stack: stack}
	presetWorkloads(c) // workloads.go
	return c
}

// decodeObject decodes a structured key strictly: unknown fields and wrong types are errors that
// name the full key path (kolotoc:towers.gpusPerTower).
func decodeObject(field func(*Config) any) func(*Config, string, string) []FieldError {
	return func(c *Config, key, v string) []FieldError {
		dec := json.NewDecoder(bytes.NewReader([]byte(v)))
		dec.DisallowUnknownFields()
		err := dec.Decode(field(c))
		if err == nil && dec.More() {
			err = errors.New("trailing data after the value")
		}
		if err == nil {
			return nil
		}
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			path := key
			if typeErr.Field != "" {
				for _, f := range strings.Split(typeErr.Field, ".") {
					path = fieldKey(path, f)
				}
			}
			return []FieldError{{Key: path, Value: typeErr.Value,
				Msg: fmt.Sprintf("wrong type; want %s", jsonKind(typeErr.Type.Kind().String()))}}
		case errors.As(err, &syntaxErr):
			return []FieldError{{Key: key, Value: abbreviate(v), Msg: "not a YAML/JSON value: " + err.Error()}}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			quoted := strings.TrimPrefix(err.Error(), "json: unknown field ")
			name, uerr := strconv.Unquote(quoted)
			if uerr != nil {
				name = strings.Trim(quoted, `"`)
			}
			// encoding/json names the field, not where it is: find it in the value.
			var raw any
			if json.Unmarshal([]byte(v), &raw) == nil {
				if path, allowed, ok := unknownField(reflect.TypeOf(field(c)), raw, key, name); ok {
					return []FieldError{{Key: path, Value: "(set)", Msg: "unknown field; allowed: " + strings.Join(allowed, ", ")}}
				}
			}
			return []FieldError{{Key: fieldKey(key, name), Value: "(set)",
				Msg: "unknown field; allowed: " + strings.Join(jsonFields(field(c)), ", ")}}
		default:
			return []FieldError{{Key: key, Value: abbreviate(v), Msg: err.Error()}}
		}
	}
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	}
	return k
}

func abbreviate(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
