// Command walk measures how the stack configuration travels through the code (issue 32), so that
// a change of layout can be judged by figures rather than by eye. It is a measuring tool of the
// test bed, not part of the product; it reads the module's source and writes a report:
//
//	go run ./testbed/checks/walk [-dir DIR] [-from kolotoc/stacks.Deploy] [-v]
//	    [-trace <package>.<Type>.<Field>]...
//
// It type-checks every package of the module under stacks/ and components/ (the standard
// library's go/types; the dependencies' export data from `go list -export`), then reports:
//
//   - the walk: a depth-first walk of the static references from -from, in source order, each
//     function (or package-level variable with an initializer) entered once. A reference is a
//     call, a function used as a value or a package variable read (its initializer's closures are
//     walked: a table of functions is walked through, each function of it where its field is
//     read, wl.Deploy, not where the table is written). Each step moves into the callee's file and,
//     when the callee is done, back into the caller's. "down" counts calls from stacks/ into
//     components/, "up" the returns from components/ back into stacks/, "revisits" every step
//     (call or return) into a file the walk had been in and left before.
//   - the files of the -from package: a file depends on another when one of its declarations
//     names one declared there. "floors" is the longest chain of dependencies once cycles are
//     folded; "back edges" the dependencies between files that depend on each other (a cycle).
//   - traces (-trace): the functions that read a field of a config section and those that pass
//     the section on, by file: e.g. kolotoc:towers.count is kolotoc/components/ring.Config.Count.
//   - lists: the declarations of the -from package (tests aside) that name three or more
//     workloads (a Config section or the workload's package), each a list of workloads.
//
// It measures the code, as the test bed's other checks do, and lives with them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	dir := flag.String("dir", ".", "the module's directory")
	from := flag.String("from", "kolotoc/stacks.Deploy", "where the walk starts: <package>.<function>")
	verbose := flag.Bool("v", false, "print the walk step by step")
	var traces []string
	flag.Func("trace", "a field to trace, <package>.<Type>.<Field> (repeatable), e.g. kolotoc/components/ring.Config.Count", func(s string) error {
		traces = append(traces, s)
		return nil
	})
	flag.Parse()
	if err := run(os.Stdout, *dir, *from, *verbose, traces); err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
}

type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Module     *struct{ Path string }
}

// node is a function or a package-level variable: where the walk can step.
type node struct {
	pkg  string
	file string // relative to the module
	body ast.Node
}

type world struct {
	// fieldVals are the functions a struct literal gives a field of function type (a table's
	// entries): the walk steps into them where the field is read (wl.Deploy), not where the
	// table is written, so that a table of every phase is walked phase by phase.
	fieldVals map[*types.Var][]*node
	fset      *token.FileSet
	root      string
	nodes     map[types.Object]*node
	info      *types.Info
	pkgs      map[string]*types.Package
	files     map[string][]*ast.File // package → files
}

func load(dir string) (*world, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-e", "-json", "-export", "-deps", "./stacks/...", "./components/...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var all []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		all = append(all, p)
	}
	exports := map[string]string{}
	for _, p := range all {
		exports[p.ImportPath] = p.Export
	}
	w := &world{fieldVals: map[*types.Var][]*node{}, fset: token.NewFileSet(), root: root, nodes: map[types.Object]*node{}, pkgs: map[string]*types.Package{},
		files: map[string][]*ast.File{},
		info: &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{},
			Selections: map[*ast.SelectorExpr]*types.Selection{}, Types: map[ast.Expr]types.TypeAndValue{}}}
	gc := importer.ForCompiler(w.fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	imp := importerFunc(func(path string) (*types.Package, error) {
		if p, ok := w.pkgs[path]; ok {
			return p, nil
		}
		return gc.Import(path)
	})
	for _, p := range all { // -deps lists a package after its dependencies
		if p.Module == nil || p.Module.Path != "kolotoc" {
			continue
		}
		var files []*ast.File
		for _, f := range p.GoFiles {
			af, err := parser.ParseFile(w.fset, filepath.Join(p.Dir, f), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, af)
		}
		conf := types.Config{Importer: imp, Error: func(error) {}}
		tp, err := conf.Check(p.ImportPath, w.fset, files, w.info)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.ImportPath, err)
		}
		// A variable set in an init function (a table that refers back to functions reading it)
		// is walked through that assignment, as an initializer would be.
		var inits []*ast.FuncDecl
		defer func() {
			for _, d := range inits {
				for _, st := range d.Body.List {
					if as, ok := st.(*ast.AssignStmt); ok {
						for _, l := range as.Lhs {
							if id, ok := l.(*ast.Ident); ok {
								if n := w.nodes[w.info.Uses[id]]; n != nil {
									n.body = as
								}
							}
						}
					}
				}
			}
		}()
		w.pkgs[p.ImportPath] = tp
		for _, f := range files {
			rel, _ := filepath.Rel(root, w.fset.Position(f.Pos()).Filename)
			ast.Inspect(f, func(x ast.Node) bool {
				kv, ok := x.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				if fv := funcField(w.info, kv); fv != nil {
					w.fieldVals[fv] = append(w.fieldVals[fv], &node{p.ImportPath, rel, kv.Value})
				}
				return true
			})
		}
		w.files[p.ImportPath] = files
		for _, f := range files {
			rel, _ := filepath.Rel(root, w.fset.Position(f.Pos()).Filename)
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Body != nil {
						w.nodes[w.info.Defs[d.Name]] = &node{p.ImportPath, rel, d}
					}
					if d.Name.Name == "init" && d.Recv == nil && d.Body != nil {
						inits = append(inits, d)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if vs, ok := s.(*ast.ValueSpec); ok && d.Tok == token.VAR {
							for _, n := range vs.Names {
								w.nodes[w.info.Defs[n]] = &node{p.ImportPath, rel, vs}
							}
						}
					}
				}
			}
		}
	}
	return w, nil
}

// funcField is the struct field of function type a key of a struct literal names, or nil.
func funcField(info *types.Info, kv *ast.KeyValueExpr) *types.Var {
	id, ok := kv.Key.(*ast.Ident)
	if !ok {
		return nil
	}
	v, ok := info.Uses[id].(*types.Var)
	if !ok || !v.IsField() {
		return nil
	}
	if _, fn := v.Type().Underlying().(*types.Signature); !fn {
		return nil
	}
	return v
}

type importerFunc func(string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// target is the node an identifier refers to, if the walk can step there.
func (w *world) target(id *ast.Ident) *node {
	obj := w.info.Uses[id]
	if fn, ok := obj.(*types.Func); ok {
		obj = fn.Origin()
	}
	if v, ok := obj.(*types.Var); ok && v.Origin() != v {
		obj = v.Origin()
	}
	return w.nodes[obj]
}

func area(pkg string) string {
	switch {
	case strings.HasPrefix(pkg, "kolotoc/stacks"):
		return "stacks"
	case strings.HasPrefix(pkg, "kolotoc/components"):
		return "components"
	}
	return "other"
}

type walkStats struct {
	steps, down, up, revisits, nodes int
	files, pkgs                      map[string]bool
}

func (w *world) walk(out io.Writer, start *node, verbose bool) walkStats {
	st := walkStats{files: map[string]bool{}, pkgs: map[string]bool{}}
	seen := map[*node]bool{}
	left := map[string]bool{} // files the walk has been in and left
	cur := start.file
	move := func(to *node, depth int, ret bool) {
		from := cur
		if from == to.file {
			return
		}
		st.steps++
		fa, ta := area(pkgOfFile(w, from)), area(to.pkg)
		if fa == "stacks" && ta == "components" && !ret {
			st.down++
		}
		if fa == "components" && ta == "stacks" && ret {
			st.up++
		}
		left[from] = true
		if left[to.file] {
			st.revisits++
		}
		if verbose {
			arrow := "->"
			if ret {
				arrow = "<-"
			}
			fmt.Fprintf(out, "%s%s %s\n", strings.Repeat("  ", depth), arrow, to.file)
		}
		cur = to.file
	}
	var visit func(n *node, depth int)
	visit = func(n *node, depth int) {
		seen[n] = true
		st.nodes++
		st.files[n.file] = true
		st.pkgs[n.pkg] = true
		step := func(t *node) {
			if t == nil || seen[t] {
				return
			}
			move(t, depth+1, false)
			visit(t, depth+1)
			move(n, depth, true)
		}
		ast.Inspect(n.body, func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.KeyValueExpr:
				if funcField(w.info, x) != nil {
					return false // entered where the field is read
				}
			case *ast.SelectorExpr:
				if sel := w.info.Selections[x]; sel != nil {
					if v, ok := sel.Obj().(*types.Var); ok {
						for _, t := range w.fieldVals[v.Origin()] {
							step(t)
						}
					}
				}
			case *ast.Ident:
				step(w.target(x))
			}
			return true
		})
	}
	visit(start, 0)
	return st
}

var fileToPkg = map[string]string{}

func pkgOfFile(w *world, file string) string {
	if p, ok := fileToPkg[file]; ok {
		return p
	}
	for _, n := range w.nodes {
		fileToPkg[n.file] = n.pkg
	}
	return fileToPkg[file]
}

// fileGraph: file → files it depends on, within pkg.
func (w *world) fileGraph(pkg string) map[string]map[string]bool {
	g := map[string]map[string]bool{}
	declFile := map[types.Object]string{}
	for _, f := range w.files[pkg] {
		rel, _ := filepath.Rel(w.root, w.fset.Position(f.Pos()).Filename)
		g[rel] = map[string]bool{}
		for id, obj := range w.info.Defs {
			if obj != nil && obj.Pkg() == w.pkgs[pkg] && w.fset.Position(id.Pos()).Filename == w.fset.Position(f.Pos()).Filename {
				if obj.Parent() == w.pkgs[pkg].Scope() || isMethod(obj) {
					declFile[obj] = rel
				}
			}
		}
	}
	for _, f := range w.files[pkg] {
		rel, _ := filepath.Rel(w.root, w.fset.Position(f.Pos()).Filename)
		ast.Inspect(f, func(x ast.Node) bool {
			if id, ok := x.(*ast.Ident); ok {
				obj := w.info.Uses[id]
				if fn, ok := obj.(*types.Func); ok {
					obj = fn.Origin()
				}
				if to, ok := declFile[obj]; ok && to != rel {
					g[rel][to] = true
				}
			}
			return true
		})
	}
	return g
}

func isMethod(obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	return ok && fn.Type().(*types.Signature).Recv() != nil
}

// scc returns the strongly connected components (Tarjan).
func scc(g map[string]map[string]bool) map[string]int {
	index, low, comp := map[string]int{}, map[string]int{}, map[string]int{}
	on := map[string]bool{}
	var stack []string
	i, c := 0, 0
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = i, i
		i++
		stack = append(stack, v)
		on[v] = true
		for _, u := range sortedSet(g[v]) {
			if _, ok := index[u]; !ok {
				strong(u)
				low[v] = min(low[v], low[u])
			} else if on[u] {
				low[v] = min(low[v], index[u])
			}
		}
		if low[v] == index[v] {
			for {
				u := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[u] = false
				comp[u] = c
				if u == v {
					break
				}
			}
			c++
		}
	}
	for _, v := range sortedSet(boolKeys(g)) {
		if _, ok := index[v]; !ok {
			strong(v)
		}
	}
	return comp
}

func boolKeys(g map[string]map[string]bool) map[string]bool {
	m := map[string]bool{}
	for k := range g {
		m[k] = true
	}
	return m
}

func sortedSet(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// floors is the longest chain in the graph of components.
func floors(g map[string]map[string]bool, comp map[string]int) int {
	memo := map[int]int{}
	cg := map[int]map[int]bool{}
	for v, es := range g {
		for u := range es {
			if comp[u] != comp[v] {
				if cg[comp[v]] == nil {
					cg[comp[v]] = map[int]bool{}
				}
				cg[comp[v]][comp[u]] = true
			}
		}
	}
	var depth func(c int) int
	depth = func(c int) int {
		if d, ok := memo[c]; ok {
			return d
		}
		d := 1
		for u := range cg[c] {
			d = max(d, 1+depth(u))
		}
		memo[c] = d
		return d
	}
	best := 0
	for _, c := range comp {
		best = max(best, depth(c))
	}
	return best
}

// workloads are the Config sections and packages that make a workload.
var workloads = map[string]string{
	"Towers": "towers", "Carriers": "carriers", "Sentinels": "sentinels", "Entrypoint": "entrypoint",
	"Etcd": "etcd", "Elastic": "elastic", "TFCluster": "tfcluster", "Monitoring": "monitoring", "DataIn": "dataIn",
	"kolotoc/components/ring": "towers", "kolotoc/components/entrypoint": "entrypoint",
	"kolotoc/components/etcd": "etcd", "kolotoc/components/elastic": "elastic", "kolotoc/components/tfcluster": "tfcluster",
	"kolotoc/components/monitoring": "monitoring", "kolotoc/components/datain": "dataIn",
}

// lists: the declarations of pkg that name three or more workloads, with what they name. The
// dask package is both carriers and sentinels: its own names decide (Carrier…, Sentinel…).
func (w *world) lists(pkg string) []string {
	var out []string
	for _, f := range w.files[pkg] {
		rel, _ := filepath.Rel(w.root, w.fset.Position(f.Pos()).Filename)
		for _, d := range f.Decls {
			named := map[string]bool{}
			ast.Inspect(d, func(x ast.Node) bool {
				id, ok := x.(*ast.Ident)
				if !ok {
					return true
				}
				obj := w.info.Uses[id]
				if obj == nil {
					return true
				}
				if v, ok := obj.(*types.Var); ok && v.IsField() && v.Pkg() == w.pkgs[pkg] {
					if wl, ok := workloads[v.Name()]; ok {
						named[wl] = true
					}
				}
				if obj.Pkg() != nil && obj.Pkg() != w.pkgs[pkg] {
					if wl, ok := workloads[obj.Pkg().Path()]; ok {
						named[wl] = true
					}
					if obj.Pkg().Path() == "kolotoc/components/dask" {
						switch {
						case strings.Contains(obj.Name(), "Sentinel"):
							named["sentinels"] = true
						case strings.Contains(obj.Name(), "Carrier"):
							named["carriers"] = true
						}
					}
				}
				return true
			})
			if len(named) >= 3 {
				out = append(out, fmt.Sprintf("%s:%d %s (%s)", rel, w.fset.Position(d.Pos()).Line, declName(d), strings.Join(sortedSet(named), " ")))
			}
		}
	}
	sort.Strings(out)
	return out
}

func declName(d ast.Decl) string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil {
			return "method " + d.Name.Name
		}
		return "func " + d.Name.Name
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				return d.Tok.String() + " " + s.Names[0].Name
			case *ast.TypeSpec:
				return "type " + s.Name.Name
			}
		}
	}
	return "?"
}

// trace reports the functions that read a field (a selector of it) and those that pass the
// struct holding it on (an argument, a struct field's value or a return value of that struct's
// type, or a pointer to it), by file: the trace of a config key from the decoded Config to the
// components. The decoding itself (Load's reflection over Config's key tags) is not seen.
func (w *world) trace(out io.Writer, spec string) error {
	i := strings.LastIndex(spec, ".")
	j := strings.LastIndex(spec[:i], ".")
	pkg, typ, field := spec[:j], spec[j+1:i], spec[i+1:]
	tp := w.pkgs[pkg]
	if tp == nil {
		return fmt.Errorf("trace %s: no package %s", spec, pkg)
	}
	tn, ok := tp.Scope().Lookup(typ).(*types.TypeName)
	if !ok {
		return fmt.Errorf("trace %s: no type %s", spec, typ)
	}
	st, ok := tn.Type().Underlying().(*types.Struct)
	if !ok {
		return fmt.Errorf("trace %s: %s is not a struct", spec, typ)
	}
	var fieldObj *types.Var
	for k := range st.NumFields() {
		if st.Field(k).Name() == field {
			fieldObj = st.Field(k)
		}
	}
	if fieldObj == nil {
		return fmt.Errorf("trace %s: no field %s", spec, field)
	}
	isSection := func(t types.Type) bool {
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		return types.Identical(t, tn.Type())
	}
	reads, passes := map[string]map[string]bool{}, map[string]map[string]bool{}
	add := func(m map[string]map[string]bool, file, fn string) {
		if m[file] == nil {
			m[file] = map[string]bool{}
		}
		m[file][fn] = true
	}
	for _, path := range slices.Sorted(maps.Keys(w.files)) {
		for _, f := range w.files[path] {
			rel, _ := filepath.Rel(w.root, w.fset.Position(f.Pos()).Filename)
			for _, d := range f.Decls {
				fn := declName(d)
				ast.Inspect(d, func(x ast.Node) bool {
					switch x := x.(type) {
					case *ast.SelectorExpr:
						if sel := w.info.Selections[x]; sel != nil && sel.Obj() == fieldObj {
							add(reads, rel, fn)
						}
					case *ast.CallExpr:
						for _, a := range x.Args {
							if isSection(w.info.Types[a].Type) {
								add(passes, rel, fn)
							}
						}
					case *ast.KeyValueExpr:
						if isSection(w.info.Types[x.Value].Type) {
							add(passes, rel, fn)
						}
					case *ast.ReturnStmt:
						for _, r := range x.Results {
							if isSection(w.info.Types[r].Type) {
								add(passes, rel, fn)
							}
						}
					}
					return true
				})
			}
		}
	}
	count := func(m map[string]map[string]bool) (files, fns int) {
		for _, fs := range m {
			files++
			fns += len(fs)
		}
		return
	}
	rf, rn := count(reads)
	pf, pn := count(passes)
	fmt.Fprintf(out, "trace %s: read in %d functions of %d files; the %s passed on in %d functions of %d files\n", spec, rn, rf, typ, pn, pf)
	for _, m := range []struct {
		what string
		m    map[string]map[string]bool
	}{{"reads", reads}, {"passes", passes}} {
		for _, file := range slices.Sorted(maps.Keys(m.m)) {
			fmt.Fprintf(out, "  %s %s: %s\n", m.what, file, strings.Join(slices.Sorted(maps.Keys(m.m[file])), "; "))
		}
	}
	return nil
}

func run(out io.Writer, dir, from string, verbose bool, traces []string) error {
	w, err := load(dir)
	if err != nil {
		return err
	}
	dot := strings.LastIndex(from, ".")
	pkg, name := from[:dot], from[dot+1:]
	tp := w.pkgs[pkg]
	if tp == nil {
		return fmt.Errorf("no package %s", pkg)
	}
	start := w.nodes[tp.Scope().Lookup(name)]
	if start == nil {
		return fmt.Errorf("no function %s", from)
	}
	st := w.walk(out, start, verbose)
	fmt.Fprintf(out, "walk from %s: %d functions and tables in %d files of %d packages; %d moves between files: %d trips down into components, %d back up, %d returns to files already left\n",
		from, st.nodes, len(st.files), len(st.pkgs), st.steps, st.down, st.up, st.revisits)

	g := w.fileGraph(pkg)
	comp := scc(g)
	size := map[int]int{}
	for _, c := range comp {
		size[c]++
	}
	edges, back := 0, 0
	for v, es := range g {
		for u := range es {
			edges++
			if comp[u] == comp[v] {
				back++
			}
		}
	}
	largest := 0
	for _, s := range size {
		largest = max(largest, s)
	}
	fmt.Fprintf(out, "files of %s: %d files, %d dependencies between them, %d floors, %d back edges (in cycles), largest cycle %d files\n",
		pkg, len(g), edges, floors(g, comp), back, largest)

	for _, t := range traces {
		if err := w.trace(out, t); err != nil {
			return err
		}
	}

	ls := w.lists(pkg)
	fmt.Fprintf(out, "lists of workloads in %s (declarations naming 3 or more): %d\n", pkg, len(ls))
	for _, l := range ls {
		fmt.Fprintln(out, "  "+l)
	}
	return nil
}
