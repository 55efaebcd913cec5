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
	"regexp"
	"strconv"
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

// probeStacks are the committed stacks the allowed values are probed on: validation checks some
// keys on one cloud only.
var probeStacks = []string{"Pulumi.dev.yaml", "Pulumi.prod.yaml", "examples/aws/Pulumi.aws.yaml",
	"examples/azure/Pulumi.azure.yaml", "examples/workloads/Pulumi.workloads.yaml", "examples/gpu-dev/Pulumi.gpu-dev.yaml"}

// invalid is a value no string setting accepts, set to learn what validation allows instead.
const invalid = "NOT/valid value"

// Row is one setting: a key path below kolotoc: (towers.gpusPerTower, nodePools[].name).
type Row struct {
	Path, Type, Allowed, Doc string
	Defaults                 []CloudDefault // for the clouds whose minimal stack leaves the setting unset
	leaf                     bool           // a value, not an object or a list of objects
}

// CloudDefault is what Load fills for a setting in one cloud's minimal stack: Value ("" when it
// fills nothing), or Derived when the value follows the pools or another setting (it differs in
// the stack with other pools).
type CloudDefault struct {
	Cloud, Value string
	Derived      bool
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
// defaults from Load of each cloud's minimal stack, the allowed values from validation, the text
// from comments.
func Reference(root string) (Ref, error) {
	sets := map[*minimalStack][2]map[string]bool{}
	for _, m := range minimalStacks {
		if err := m.load(); err != nil {
			return Ref{}, err
		}
		sets[m] = [2]map[string]bool{setPaths(m.raw(false)), setPaths(m.raw(true))}
	}
	defaults := func(path string) ([]CloudDefault, error) {
		var out []CloudDefault
		for _, m := range minimalStacks {
			if sets[m][0][path] {
				continue // the stack's own value, not a default
			}
			d := CloudDefault{Cloud: m.Cloud, Value: format(valueAt(m.loaded, path), refStack)}
			if !sets[m][1][path] && format(valueAt(m.other, path), altStack) != d.Value {
				d.Value, d.Derived = "", true
			}
			if strings.ContainsAny(d.Value, "`") {
				return nil, fmt.Errorf("%s: the default %q has a backquote, which the reference cannot show", path, d.Value)
			}
			out = append(out, d)
		}
		return out, nil
	}
	probes, err := readProbes(root)
	if err != nil {
		return Ref{}, err
	}
	src := &sources{root: root, types: map[string]map[string]typeDoc{}, consts: map[string]map[string]string{}}
	// A Config field's own line comment names its key; a comment above it may speak for a group.
	configDoc := func(field string) string {
		td := src.pkg(module + "/stacks")["Config"]
		if c := td.comments[field]; c != "" {
			return c
		}
		return td.fields[field]
	}

	var ref Ref
	for _, k := range stacks.Keys() {
		t := reflect.TypeOf(k.Field(&stacks.Config{})).Elem()
		fieldName := structFieldFor(k)
		kd := KeyDoc{Name: k.Name, Required: k.Required(), Secret: k.Secret}
		kd.Type, kd.Items = k.PulumiType()
		kd.ProjectDefault, _ = k.ProjectDefault()
		doc := strings.TrimSpace(strings.TrimPrefix(stripKey(configDoc(fieldName), k.Name), "—"))
		if k.Secret {
			doc = strings.TrimSpace(strings.TrimPrefix(doc, "secret;"))
		}
		doc = src.userDoc(doc, fieldName, module+"/stacks")
		kd.Doc = doc
		kd.Self = Row{Path: k.Name, Type: typeName(t), Doc: doc}
		isObject := t.Kind() == reflect.Struct && !opaque(t) || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct)
		if k.Secret {
			kd.Self.Type = "secret " + kd.Self.Type
		} else if !isObject && !k.Required() {
			if kd.Self.Defaults, err = defaults(k.Name); err != nil {
				return Ref{}, err
			}
		}
		if !k.Secret && !isObject && t.Kind() == reflect.String {
			kd.Self.Allowed = probes.allowed(k.Name)
		}
		w := walker{src: src, probes: probes}
		switch {
		case t == reflect.TypeOf(stacks.Secret{}) || !isObject:
		case t.Kind() == reflect.Struct:
			w.walk(k.Name, t)
		case t.Kind() == reflect.Slice:
			w.walk(k.Name+"[]", t.Elem())
		}
		for i := range w.rows {
			if w.rows[i].leaf {
				if w.rows[i].Defaults, err = defaults(w.rows[i].Path); err != nil {
					return Ref{}, err
				}
			}
		}
		kd.Rows = w.rows
		ref.Keys = append(ref.Keys, kd)
	}
	return ref, nil
}

// valueAt is the setting at path (towers.gpusPerTower, nodePools[].name: a list's first element)
// in cfg; invalid where there is none.
func valueAt(cfg *stacks.Config, path string) reflect.Value {
	parts := strings.Split(path, ".")
	top, list := strings.CutSuffix(parts[0], "[]")
	var v reflect.Value
	for _, k := range stacks.Keys() {
		if k.Name == top {
			v = reflect.ValueOf(k.Field(cfg)).Elem()
		}
	}
	if list {
		v = first(v)
	}
	for _, p := range parts[1:] {
		if p == "<name>" {
			return reflect.Value{}
		}
		name, list := strings.CutSuffix(p, "[]")
		v = fieldByJSON(reflect.Indirect(v), name)
		if list {
			v = first(v)
		}
	}
	return v
}

func first(v reflect.Value) reflect.Value {
	if !v.IsValid() || v.Kind() != reflect.Slice || v.Len() == 0 {
		return reflect.Value{}
	}
	return v.Index(0)
}

// fieldByJSON is the field of struct v that JSON names name, embedded structs included.
func fieldByJSON(v reflect.Value, name string) reflect.Value {
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			if fv := fieldByJSON(v.Field(i), name); fv.IsValid() {
				return fv
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if f.IsExported() && tag == name {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// structFieldFor finds the name of the Config field k fills.
func structFieldFor(k stacks.Key) string {
	cfg := &stacks.Config{}
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

func (w *walker) walk(path string, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			w.walk(path, f.Type)
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := path + "." + name
		ft := f.Type
		row := Row{Path: p, Type: typeName(ft), Doc: w.src.userDoc(w.src.field(t, f.Name), f.Name, t.PkgPath())}
		base := ft
		if base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		switch {
		case base.Kind() == reflect.Struct && !opaque(base):
			w.rows = append(w.rows, row)
			w.walk(p, base)
			continue
		case base.Kind() == reflect.Slice && base.Elem().Kind() == reflect.Struct:
			w.rows = append(w.rows, row)
			w.walk(p+"[]", base.Elem())
			continue
		case base.Kind() == reflect.Map && base.Elem().Kind() == reflect.Struct:
			w.rows = append(w.rows, row)
			w.walk(p+".<name>", base.Elem())
			continue
		}
		row.leaf = true
		if base.Kind() == reflect.String {
			row.Allowed = w.probes.allowed(p)
		}
		w.rows = append(w.rows, row)
	}
}

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// opaque reports whether t is a struct that decodes itself from a plain value (a map of
// quantities, torchrun's options): the stack file writes the value, not the struct's fields.
func opaque(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(jsonUnmarshaler)
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
		if opaque(t) {
			for i := 0; i < t.NumField(); i++ { // the one exported field holds what was decoded
				if t.Field(i).IsExported() {
					return typeName(t.Field(i).Type)
				}
			}
		}
		return "object"
	}
	return t.Kind().String()
}

// format is a default as a stack file would write it, with <stack> for the stack's name; "" when
// the program fills nothing. false is a default like any other; an integer the program leaves
// at 0 is unset (a count, a size, a port the code fills only when it needs one, as
// storage.backup.retentionDays' 7 once backups are on), and the comment gives the rule.
func format(v reflect.Value, stack string) string {
	if !v.IsValid() {
		return ""
	}
	stack = strings.ToLower(stack)
	switch v.Kind() {
	case reflect.Bool:
		return fmt.Sprint(v.Interface())
	case reflect.Int:
		if v.Int() == 0 {
			return ""
		}
		return fmt.Sprint(v.Interface())
	case reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return format(v.Elem(), stack)
	case reflect.String:
		return strings.ReplaceAll(v.String(), stack, "<stack>")
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return ""
		}
	case reflect.Struct:
		if v.IsZero() {
			return ""
		}
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return strings.ReplaceAll(string(b), stack, "<stack>")
}

// sources finds the comments of types and fields in the module's Go files.
type sources struct {
	root   string
	types  map[string]map[string]typeDoc // package path -> type name -> doc
	consts map[string]map[string]string  // package path -> constant name -> its string value
}

type typeDoc struct {
	fields   map[string]string // comment above and line comment
	comments map[string]string // line comment alone
}

func (s *sources) pkg(path string) map[string]typeDoc {
	if m, ok := s.types[path]; ok {
		return m
	}
	m, consts, exprs := map[string]typeDoc{}, map[string]string{}, map[string]ast.Expr{}
	s.types[path], s.consts[path] = m, consts
	defer func() {
		for name, e := range exprs {
			if v, ok := stringConst(e, exprs, 0); ok {
				consts[name] = v
			}
		}
	}()
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
			if ok && gd.Tok == token.CONST {
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							exprs[n.Name] = vs.Values[i]
						}
					}
				}
			}
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				td := typeDoc{fields: map[string]string{}, comments: map[string]string{}}
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

// userDoc is a comment as the user's documentation: without the Go name it starts with
// ("SubnetID (azure): …", "ShareName is …"), with a Default… constant's value in its place (or,
// when it has no plain value, without the clause naming it), and without the Go files it names.
func (s *sources) userDoc(doc, goName, pkg string) string {
	if m := regexp.MustCompile(`^` + regexp.QuoteMeta(goName) + `(?: \(([^)]*)\))?(?::| is| are) `).FindStringSubmatch(doc); m != nil {
		doc = doc[len(m[0]):]
		if m[1] != "" {
			doc = m[1] + ": " + doc
		}
	}
	consts := s.consts[pkg]
	if consts == nil {
		s.pkg(pkg)
		consts = s.consts[pkg]
	}
	doc = defaultConst.ReplaceAllStringFunc(doc, func(name string) string {
		if v, ok := consts[name]; ok {
			return "`" + v + "`"
		}
		return name
	})
	doc = defaultClause.ReplaceAllString(doc, "")
	doc = goFiles.ReplaceAllStringFunc(doc, func(paren string) string {
		var keep []string
		for _, item := range strings.Split(strings.TrimSuffix(strings.TrimLeft(paren, " ("), ")"), ", ") {
			if !strings.HasSuffix(item, ".go") {
				keep = append(keep, item)
			}
		}
		if len(keep) == 0 {
			return ""
		}
		return " (" + strings.Join(keep, ", ") + ")"
	})
	return strings.TrimSpace(doc)
}

var (
	defaultConst  = regexp.MustCompile(`\bDefault[A-Z]\w*`)
	defaultClause = regexp.MustCompile(`(?:[;,] )?\bdefault Default[A-Z]\w*`)
	goFiles       = regexp.MustCompile(` ?\([^()]*\.go\b[^()]*\)`)
)

// stringConst is the value of a string constant's expression: literals, the package's other
// constants and + between them.
func stringConst(e ast.Expr, exprs map[string]ast.Expr, depth int) (string, bool) {
	if depth > 10 {
		return "", false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			v, err := strconv.Unquote(e.Value)
			return v, err == nil
		}
	case *ast.Ident:
		if x, ok := exprs[e.Name]; ok {
			return stringConst(x, exprs, depth+1)
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, okA := stringConst(e.X, exprs, depth+1)
			b, okB := stringConst(e.Y, exprs, depth+1)
			return a + b, okA && okB
		}
	}
	return "", false
}

func (s *sources) field(t reflect.Type, name string) string {
	return s.pkg(t.PkgPath())[t.Name()].fields[name]
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
		for k, v := range secrets { // the secrets the committed files keep elsewhere
			raw.Values[k], raw.Secrets[k] = v, true
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
