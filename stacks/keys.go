package stacks

import (
	"reflect"
	"strings"

	"kolotoc/components/meta"
)

// Key is one top-level config key (kolotoc:<Name>) as Pulumi.yaml declares it and the
// configuration reference (docs/reference/configuration.md) documents it; both are generated
// from Keys by `go run ./hack/configref`, and a test fails when either disagrees with the code.
type Key struct {
	Name   string
	Secret bool // must be set with --secret (secretKeys)
	// Field points to the Config field the key fills, in c.
	Field func(c *Config) any
}

// configKey is one top-level key as the Config field tagged `key:"<name>"` declares it: the
// field, its decoder (by the field's type) and whether it must be set as a secret. The tags are
// the one list of keys: Load decodes, Keys documents and secretKeys demands a secret from them.
type configKey struct {
	index  int // of the field in Config
	decode func(c *Config, key, v string) []FieldError
	secret bool
}

// configKeys are the keys of Config's tagged fields, and secretKeys those that must be set with
// --secret (a plaintext value would sit unencrypted in Pulumi.<stack>.yaml and in the state
// file), in the fields' order.
var configKeys, secretKeys = func() (map[string]configKey, []string) {
	keys, secrets := map[string]configKey{}, []string{}
	t := reflect.TypeOf(Config{})
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("key")
		if !ok {
			continue
		}
		k := configKey{index: i}
		field := func(c *Config) reflect.Value { return reflect.ValueOf(c).Elem().Field(i) }
		switch f.Type {
		case reflect.TypeOf(""):
			k.decode = func(c *Config, _ string, v string) []FieldError {
				field(c).SetString(v)
				return nil
			}
		case reflect.TypeOf(Secret{}):
			k.decode, k.secret = func(c *Config, _ string, v string) []FieldError {
				field(c).Set(reflect.ValueOf(NewSecret(v)))
				return nil
			}, true
		case reflect.TypeOf(map[string]Secret{}):
			k.decode, k.secret = decodeRegistryPasswords, true // the one map of secrets (registries.go)
		default:
			k.decode = decodeObject(func(c *Config) any { return field(c).Addr().Interface() })
		}
		keys[name] = k
		if k.secret {
			secrets = append(secrets, name)
		}
	}
	return keys, secrets
}()

// field is the Config field behind the key, in c.
func (k configKey) field(c *Config) any {
	return reflect.ValueOf(c).Elem().Field(k.index).Addr().Interface()
}

// requiredKeys have no default: Pulumi.yaml declares them without one, so the Pulumi CLI itself
// refuses a stack that does not set them.
var requiredKeys = map[string]bool{"cloud": true}

// Keys returns every top-level key the program reads, sorted by name.
func Keys() []Key {
	out := make([]Key, 0, len(configKeys))
	for _, name := range meta.SortedKeys(configKeys) {
		k := configKeys[name]
		out = append(out, Key{Name: name, Secret: k.secret, Field: k.field})
	}
	return out
}

// PulumiType is the key's type in Pulumi's project config schema (string, integer, boolean,
// array, object) and, for an array, its items' type.
func (k Key) PulumiType() (typ, items string) {
	t := reflect.TypeOf(k.Field(&Config{})).Elem()
	if t == reflect.TypeOf(Secret{}) {
		return "string", ""
	}
	typ = pulumiKind(t)
	if typ == "array" {
		items = pulumiKind(t.Elem())
	}
	return typ, items
}

func pulumiKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice:
		return "array"
	default:
		return "object"
	}
}

// Required reports whether the stack must set the key (Pulumi.yaml gives it no default).
func (k Key) Required() bool { return requiredKeys[k.Name] }

// ProjectDefault is the default Pulumi.yaml declares for an optional key, as the program then
// receives it from the Pulumi CLI when the stack does not set the key: the type's empty value
// ("", 0, false, {} or [] as JSON text). Load treats it as unset, so declaring it changes nothing.
func (k Key) ProjectDefault() (string, bool) {
	if k.Required() {
		return "", false
	}
	typ, _ := k.PulumiType()
	return emptyValues[typ], true
}

var emptyValues = map[string]string{"string": "", "integer": "0", "boolean": "false", "object": "{}", "array": "[]"}

// projectDefaults maps each optional key to its ProjectDefault.
var projectDefaults = func() map[string]string {
	m := map[string]string{}
	for _, k := range Keys() {
		if d, ok := k.ProjectDefault(); ok {
			m[k.Name] = d
		}
	}
	return m
}()

// DropProjectDefaults removes from raw the values the Pulumi CLI filled from Pulumi.yaml's
// defaults (a kolotoc key whose value is its type's empty value, not set as a secret): the stack
// left them unset, and every reader after this one (the preview copy's check, Load) sees them so.
func DropProjectDefaults(raw *Raw) {
	for full, v := range raw.Values {
		ns, key, ok := strings.Cut(full, ":")
		if !ok || ns != ConfigNamespace || raw.Secrets[full] {
			continue
		}
		if d, ok := projectDefaults[key]; ok && v == d {
			delete(raw.Values, full)
		}
	}
}
