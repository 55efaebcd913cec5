package stacks

import (
	"reflect"
	"strings"
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

// keyFields is the Config field behind each key of topLevel (a test keeps the two alike).
var keyFields = map[string]func(c *Config) any{
	"cloud":             func(c *Config) any { return &c.Cloud },
	"namespace":         func(c *Config) any { return &c.Namespace },
	"awaitTimeout":      func(c *Config) any { return &c.AwaitTimeout },
	"cluster":           func(c *Config) any { return &c.Cluster },
	"nodePools":         func(c *Config) any { return &c.NodePools },
	"storage":           func(c *Config) any { return &c.Storage },
	"towers":            func(c *Config) any { return &c.Towers },
	"carriers":          func(c *Config) any { return &c.Carriers },
	"sentinels":         func(c *Config) any { return &c.Sentinels },
	"entrypoint":        func(c *Config) any { return &c.Entrypoint },
	"devicePlugin":      func(c *Config) any { return &c.DevicePlugin },
	"fabric":            func(c *Config) any { return &c.Fabric },
	"etcd":              func(c *Config) any { return &c.Etcd },
	"elastic":           func(c *Config) any { return &c.Elastic },
	"tfcluster":         func(c *Config) any { return &c.TFCluster },
	"monitoring":        func(c *Config) any { return &c.Monitoring },
	"code":              func(c *Config) any { return &c.Code },
	"dataIn":            func(c *Config) any { return &c.DataIn },
	"queue":             func(c *Config) any { return &c.Queue },
	"suspend":           func(c *Config) any { return &c.Suspend },
	"runAsUser":         func(c *Config) any { return &c.RunAsUser },
	"grafanaPassword":   func(c *Config) any { return &c.GrafanaPassword },
	"entrypointTLSKey":  func(c *Config) any { return &c.EntrypointTLSKey },
	"jupyterPassword":   func(c *Config) any { return &c.JupyterPassword },
	"sshKeySeed":        func(c *Config) any { return &c.SSHKeySeed },
	"fit":               func(c *Config) any { return &c.Fit },
	"previewOf":         func(c *Config) any { return &c.PreviewOf },
	"adoptNamespace":    func(c *Config) any { return &c.AdoptNamespace },
	"registries":        func(c *Config) any { return &c.Registries },
	"registryPasswords": func(c *Config) any { return &c.RegistryPasswords },
	"storageAccountKey": func(c *Config) any { return &c.StorageAccountKey },
}

// requiredKeys have no default: Pulumi.yaml declares them without one, so the Pulumi CLI itself
// refuses a stack that does not set them.
var requiredKeys = map[string]bool{"cloud": true}

// Keys returns every top-level key the program reads, sorted by name.
func Keys() []Key {
	secret := map[string]bool{}
	for _, k := range secretKeys {
		secret[k] = true
	}
	out := make([]Key, 0, len(keyFields))
	for _, name := range sortedKeys(keyFields) {
		out = append(out, Key{Name: name, Secret: secret[name], Field: keyFields[name]})
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
