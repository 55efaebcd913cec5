package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"kolotoc/stacks"
)

// The files configref writes, relative to the project directory.
const (
	ReferenceFile = "docs/reference/configuration.md"
	ProjectFile   = "Pulumi.yaml"
)

// module is the main module's path: a type's package directory is its import path below it.
const module = "kolotoc"

// referenceStack is the stack whose defaults the reference shows: it sets only what the program
// cannot default (the cloud, the pools, the secrets). A default that depends on the cloud or the
// pools is filled for this stack; the field's comment says the rule.
var referenceStack = stacks.Raw{
	Project: "kolotoc", Stack: "STACK",
	Values: map[string]string{
		"kolotoc:cloud":           stacks.CloudSimulated,
		"kolotoc:nodePools":       `[{"name":"gpu","nodes":2,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100"},{"name":"cpu"}]`,
		"kolotoc:sshKeySeed":      "9f2c4e7a1b8d3f6052e9a7c1d4b8f3e6a0c5d9e2f7b1a4c8e3d6f9a2b5c7e1d4",
		"kolotoc:jupyterPassword": "reference-password-0123",
	},
	Secrets: map[string]bool{"kolotoc:sshKeySeed": true, "kolotoc:jupyterPassword": true},
}

// ReferenceStackSummary says in the reference what referenceStack is.
const ReferenceStackSummary = "`kolotoc:cloud: simulated`, two node pools (`gpu`: 2 nodes × 8 `nvidia-tesla-a100`; `cpu`: " +
	"everything defaulted) and its secrets, in a stack named `<stack>`"

// probeStacks are the committed stacks the allowed values are probed on: validation checks some
// keys on one cloud only.
var probeStacks = []string{"Pulumi.dev.yaml", "Pulumi.prod.yaml", "examples/aws/Pulumi.aws.yaml",
	"examples/azure/Pulumi.azure.yaml", "examples/workloads/Pulumi.workloads.yaml", "examples/gpu-dev/Pulumi.gpu-dev.yaml"}

// invalid is a value no string setting accepts, set to learn what validation allows instead.
const invalid = "NOT/valid value"

// Row is one setting: a key path below kolotoc: (towers.gpusPerTower, nodePools[].name).
type Row struct {
	Path, Type, Default, Allowed, Doc string
}

// KeyDoc is one top-level key and its settings.
type KeyDoc struct {
	Name             string
	Type, Items      string // Pulumi's project config type
	Required, Secret bool
	ProjectDefault   string
	Doc              string // the Config field's comment, or the section type's
	Rows             []Row  // the settings inside an object or list of objects
	Self             Row    // the key itself
}

// Ref is the whole reference.
type Ref struct{ Keys []KeyDoc }

// Rows counts the settings.
func (r Ref) Rows() int {
	n := 0
	for _, k := range r.Keys {
		n += 1 + len(k.Rows)
	}
	return n
}

// Reference builds the reference from the code: the key list and types from stacks.Keys, the
// defaults from Load of referenceStack, the allowed values from validation, the text from comments.
func Reference(root string) (Ref, error) {
	cfg, err := stacks.Load(referenceStack)
	if err != nil {
		return Ref{}, fmt.Errorf("the reference stack: %w", err)
	}
	probes, err := readProbes(root)
	if err != nil {
		return Ref{}, err
	}
	src := &sources{root: root, types: map[string]map[string]typeDoc{}}
	// A Config field's own line comment names its key; a comment above it may speak for a group.
	configDoc := func(field string) string {
		td := src.pkg(module + "/stacks")["Config"]
		if c := td.comments[field]; c != "" {
			return c
		}
		return td.fields[field]
	}
	ct := reflect.TypeOf(stacks.Config{})

	var ref Ref
	for _, k := range stacks.Keys() {
		v := reflect.ValueOf(k.Field(cfg)).Elem()
		t := v.Type()
		fieldName := structFieldFor(cfg, k)
		kd := KeyDoc{Name: k.Name, Required: k.Required(), Secret: k.Secret}
		kd.Type, kd.Items = k.PulumiType()
		kd.ProjectDefault, _ = k.ProjectDefault()
		doc := strings.TrimSpace(strings.TrimPrefix(stripKey(configDoc(fieldName), k.Name), "—"))
		if k.Secret {
			doc = strings.TrimSpace(strings.TrimPrefix(doc, "secret;"))
		}
		if _, ok := ct.FieldByName(fieldName); ok && (t.Kind() == reflect.Struct || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct)) && t != reflect.TypeOf(stacks.Secret{}) {
			elem := t
			if t.Kind() == reflect.Slice {
				elem = t.Elem()
			}
			if td := src.typeDoc(elem); td != "" {
				doc = strings.TrimSpace(joinDocs(doc, td))
			}
		}
		kd.Doc = doc
		kd.Self = Row{Path: k.Name, Type: typeName(t), Doc: doc}
		if k.Secret {
			kd.Self.Type = "secret " + kd.Self.Type
		} else if t.Kind() != reflect.Struct && !(t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct) {
			kd.Self.Default = format(v)
			if t.Kind() == reflect.String {
				kd.Self.Allowed = probes.allowed(k.Name)
			}
		}
		w := walker{src: src, probes: probes}
		switch {
		case t == reflect.TypeOf(stacks.Secret{}):
		case t.Kind() == reflect.Struct:
			w.walk(k.Name, t, v)
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			var ev reflect.Value
			if v.Len() > 0 {
				ev = v.Index(0)
			}
			w.walk(k.Name+"[]", t.Elem(), ev)
		}
		kd.Rows = w.rows
		ref.Keys = append(ref.Keys, kd)
	}
	return ref, nil
}

// structFieldFor finds the name of the Config field k fills.
func structFieldFor(cfg *stacks.Config, k stacks.Key) string {
	target := reflect.ValueOf(k.Field(cfg)).Pointer()
	cv := reflect.ValueOf(cfg).Elem()
	for i := 0; i < cv.NumField(); i++ {
		if cv.Field(i).Addr().Pointer() == target {
			return cv.Type().Field(i).Name
		}
	}
	return ""
}

// stripKey drops the leading "kolotoc:<key>" and "Field (kolotoc:<key>):" of a Config comment.
func stripKey(doc, key string) string {
	doc = strings.TrimSpace(doc)
	for _, p := range []string{"kolotoc:" + key + " ", "kolotoc:" + key} {
		if strings.HasPrefix(doc, p) {
			return strings.TrimSpace(doc[len(p):])
		}
	}
	if i := strings.Index(doc, "(kolotoc:"+key+"):"); i >= 0 && i < 40 {
		return strings.TrimSpace(doc[i+len("(kolotoc:"+key+"):"):])
	}
	return doc
}

func joinDocs(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return strings.TrimSuffix(a, ".") + ". " + b
}

type walker struct {
	src    *sources
	probes probes
	rows   []Row
}

func (w *walker) walk(path string, t reflect.Type, v reflect.Value) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		var fv reflect.Value
		if v.IsValid() {
			fv = v.Field(i)
		}
		if f.Anonymous && name == "" {
			w.walk(path, f.Type, fv)
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := path + "." + name
		ft := f.Type
		row := Row{Path: p, Type: typeName(ft), Doc: w.src.field(t, f.Name)}
		base := ft
		if base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		switch {
		case base.Kind() == reflect.Struct:
			w.rows = append(w.rows, row)
			var sub reflect.Value
			if fv.IsValid() && !(fv.Kind() == reflect.Pointer && fv.IsNil()) {
				sub = reflect.Indirect(fv)
			}
			w.walk(p, base, sub)
			continue
		case base.Kind() == reflect.Slice && base.Elem().Kind() == reflect.Struct:
			w.rows = append(w.rows, row)
			var sub reflect.Value
			if fv.IsValid() && fv.Len() > 0 {
				sub = fv.Index(0)
			}
			w.walk(p+"[]", base.Elem(), sub)
			continue
		case base.Kind() == reflect.Map && base.Elem().Kind() == reflect.Struct:
			w.rows = append(w.rows, row)
			w.walk(p+".<name>", base.Elem(), reflect.Value{})
			continue
		}
		if fv.IsValid() {
			row.Default = format(fv)
		}
		if base.Kind() == reflect.String {
			row.Allowed = w.probes.allowed(p)
		}
		w.rows = append(w.rows, row)
	}
}

// typeName is a type as a stack file writes it.
func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(stacks.Secret{}) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map of " + typeName(t.Key()) + " to " + typeName(t.Elem())
	case reflect.Struct:
		return "object"
	}
	return t.Kind().String()
}

// format is a default as a stack file would write it; "" when the program fills nothing.
func format(v reflect.Value) string {
	if !v.IsValid() || v.IsZero() {
		if v.IsValid() && (v.Kind() == reflect.Int || v.Kind() == reflect.Bool) {
			return fmt.Sprint(v.Interface()) // 0 and false are defaults like any other
		}
		return ""
	}
	if v.Kind() == reflect.Pointer {
		return format(v.Elem())
	}
	if v.Kind() == reflect.String {
		return strings.ReplaceAll(v.String(), strings.ToLower(referenceStack.Stack), "<stack>")
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return strings.ReplaceAll(string(b), strings.ToLower(referenceStack.Stack), "<stack>")
}

// sources finds the comments of types and fields in the module's Go files.
type sources struct {
	root  string
	types map[string]map[string]typeDoc // package path -> type name -> doc
}

type typeDoc struct {
	doc      string
	fields   map[string]string // comment above and line comment
	comments map[string]string // line comment alone
}

func (s *sources) pkg(path string) map[string]typeDoc {
	if m, ok := s.types[path]; ok {
		return m
	}
	m := map[string]typeDoc{}
	s.types[path] = m
	if path != module && !strings.HasPrefix(path, module+"/") {
		return m
	}
	dir := filepath.Join(s.root, strings.TrimPrefix(strings.TrimPrefix(path, module), "/"))
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				td := typeDoc{doc: text(ts.Doc), fields: map[string]string{}, comments: map[string]string{}}
				if td.doc == "" && len(gd.Specs) == 1 {
					td.doc = text(gd.Doc)
				}
				if st, ok := ts.Type.(*ast.StructType); ok {
					for _, fl := range st.Fields.List {
						doc := joinDocs(text(fl.Doc), text(fl.Comment))
						for _, n := range fl.Names {
							td.fields[n.Name] = doc
							td.comments[n.Name] = text(fl.Comment)
						}
					}
				}
				m[ts.Name.Name] = td
			}
		}
	}
	return m
}

func (s *sources) field(t reflect.Type, name string) string {
	return s.pkg(t.PkgPath())[t.Name()].fields[name]
}

func (s *sources) typeDoc(t reflect.Type) string {
	return s.pkg(t.PkgPath())[t.Name()].doc
}

func text(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	return strings.Join(strings.Fields(cg.Text()), " ")
}

// probes learns the values validation allows for a string setting: it sets the setting to a value
// nothing accepts in each committed stack and reads "allowed: …" from the error naming that key.
type probes []stacks.Raw

func readProbes(root string) (probes, error) {
	var out probes
	for _, p := range probeStacks {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "Pulumi."), ".yaml")
		raw, err := stacks.ReadStackFile(filepath.Join(root, p), "kolotoc", name, "")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		for k, v := range referenceStack.Values { // the secrets the committed files keep elsewhere
			if referenceStack.Secrets[k] {
				raw.Values[k], raw.Secrets[k] = v, true
			}
		}
		out = append(out, raw)
	}
	return out, nil
}

func (ps probes) allowed(path string) string {
	key := strings.ReplaceAll(path, "[]", "[0]")
	key = strings.ReplaceAll(key, ".<name>", "")
	seen := map[string]bool{}
	var found []string
	for _, raw := range ps {
		probe, ok := withValue(raw, path, invalid)
		if !ok {
			continue
		}
		_, err := stacks.Load(probe)
		var ce *stacks.ConfigError
		if !errors.As(err, &ce) {
			continue
		}
		for _, fe := range ce.Errors {
			if fe.Key != key {
				continue
			}
			_, allowed, ok := strings.Cut(fe.Msg, "allowed: ")
			if !ok {
				_, allowed, ok = strings.Cut(fe.Msg, "allowed on ")
				if ok {
					allowed = "on " + allowed
				}
			}
			if ok && !seen[allowed] {
				seen[allowed] = true
				found = append(found, allowed)
			}
		}
		if len(found) > 0 {
			break // the first stack that checks the key says it
		}
	}
	return strings.Join(found, "; ")
}

// withValue is raw with the setting at path (towers.pool, nodePools[].placement) set to value.
func withValue(raw stacks.Raw, path, value string) (stacks.Raw, bool) {
	out := stacks.Raw{Project: raw.Project, Stack: raw.Stack, Values: map[string]string{}, Secrets: raw.Secrets}
	for k, v := range raw.Values {
		out.Values[k] = v
	}
	parts := strings.Split(path, ".")
	top := "kolotoc:" + strings.TrimSuffix(parts[0], "[]")
	if len(parts) == 1 {
		out.Values[top] = value
		return out, true
	}
	var doc any
	if v, ok := out.Values[top]; ok {
		if err := json.Unmarshal([]byte(v), &doc); err != nil {
			return out, false
		}
	}
	doc, ok := set(doc, append([]string{strings.TrimPrefix(parts[0], strings.TrimSuffix(parts[0], "[]"))}, parts[1:]...), value)
	if !ok {
		return out, false
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(doc); err != nil {
		return out, false
	}
	out.Values[top] = strings.TrimSpace(b.String())
	return out, true
}

// set puts value at the path below doc; a part "[]" (alone, or ending a name) is a list's first
// element, created when missing.
func set(doc any, parts []string, value string) (any, bool) {
	if len(parts) == 0 {
		return value, true
	}
	p := parts[0]
	if p == "" {
		return set(doc, parts[1:], value)
	}
	if p == "[]" {
		list, _ := doc.([]any)
		var first any
		if len(list) > 0 {
			first = list[0]
		} else {
			list = []any{nil}
		}
		v, ok := set(first, parts[1:], value)
		list[0] = v
		return list, ok
	}
	if p == "<name>" {
		return doc, false // a map's entries have names of the user's choosing: not probed
	}
	m, _ := doc.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	name, isList := strings.CutSuffix(p, "[]")
	rest := parts[1:]
	if isList {
		rest = append([]string{"[]"}, rest...)
	}
	v, ok := set(m[name], rest, value)
	m[name] = v
	return m, ok
}
