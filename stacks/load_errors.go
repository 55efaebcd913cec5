package stacks

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// FieldError is one problem with one config key.
type FieldError struct {
	Key   string // path below the kolotoc namespace, e.g. towers.gpusPerTower
	Value string // the offending value as the user wrote it ("(unset)" when missing)
	Msg   string // what is wrong and what is allowed
}

func (e FieldError) Error() string {
	return fmt.Sprintf("%s:%s = %s: %s", ConfigNamespace, e.Key, e.Value, e.Msg)
}

// ConfigError is every problem found in a stack's configuration.
type ConfigError struct {
	Stack  string
	Errors []FieldError
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack %q: %d configuration problem(s); nothing was changed:", e.Stack, len(e.Errors))
	for _, fe := range e.Errors {
		b.WriteString("\n  - ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Keys returns the full key of every problem (kolotoc:towers.count), for tests and tools.
func (e *ConfigError) Keys() []string {
	out := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		out[i] = ConfigNamespace + ":" + fe.Key
	}
	return out
}

// plainName is a field or map key that reads unambiguously after a dot in a key path.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// fieldKey appends a field or map key to a key path: key.name when the name is plain, else
// key["name"] quoted (an empty name, a label key with dots and slashes, a typo with a space), so
// that every problem names one key, unambiguously.
func fieldKey(key, name string) string {
	if plainName.MatchString(name) {
		return key + "." + name
	}
	return key + "[" + strconv.Quote(name) + "]"
}

// jsonFields lists the json names of a struct's fields (or of a slice's element struct), for
// "unknown field; allowed: …" messages.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
