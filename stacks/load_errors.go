package stacks

import (
	"encoding/json"
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

// unknownField finds the field name that encoding/json reported unknown in raw (the value
// decoded into t): its key path below key and the fields allowed there. Like encoding/json it
// matches field names case-insensitively and looks into embedded structs; it does not look into
// a type that decodes itself (json.Unmarshaler), which reports its own errors.
func unknownField(t reflect.Type, raw any, key, name string) (string, []string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return "", nil, false
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := raw.(map[string]any)
		if !ok {
			return "", nil, false
		}
		fields := structFields(t)
		allowed := make([]string, 0, len(fields))
		for _, f := range fields {
			allowed = append(allowed, f.name)
		}
		for k, v := range obj {
			f, found := lookupField(fields, k)
			if !found {
				if k == name {
					return fieldKey(key, k), allowed, true
				}
				continue
			}
			if path, a, ok := unknownField(f.typ, v, fieldKey(key, k), name); ok {
				return path, a, true
			}
		}
	case reflect.Slice, reflect.Array:
		list, ok := raw.([]any)
		if !ok {
			return "", nil, false
		}
		for i, v := range list {
			if path, a, ok := unknownField(t.Elem(), v, fmt.Sprintf("%s[%d]", key, i), name); ok {
				return path, a, true
			}
		}
	case reflect.Map:
		obj, ok := raw.(map[string]any)
		if !ok {
			return "", nil, false
		}
		for k, v := range obj {
			if path, a, ok := unknownField(t.Elem(), v, fieldKey(key, k), name); ok {
				return path, a, true
			}
		}
	}
	return "", nil, false
}

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// jsonField is a struct field as encoding/json decodes it: its name and type.
type jsonField struct {
	name string
	typ  reflect.Type
}

// structFields are t's fields by json name, with those of its embedded structs.
func structFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, structFields(ft)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

// lookupField is the field a JSON key decodes into: an exact match first, then encoding/json's
// case-insensitive one.
func lookupField(fields []jsonField, key string) (jsonField, bool) {
	for _, f := range fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return jsonField{}, false
}
