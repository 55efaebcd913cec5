package stacks

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNoBranchOnTheCloud: the package asks the stack's cloud entry (CloudEntry, cloud.go) and
// never names a cloud itself. The names of kolotoc:cloud are declared once, in config.go; outside
// it no file of the package or of the workloads' entries (tests aside) may use those constants or
// spell a cloud's name as a string, nor switch on a Cloud field. A branch on the cloud belongs in the cloud's entry,
// stacks/clouds/<name>, which answers for every cloud the same question.
func TestNoBranchOnTheCloud(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The constants config.go declares for the names in cloudNames.
	names := map[string]bool{}
	for _, f := range pkgs["stacks"].Files {
		if fset.File(f.Pos()).Name() != "config.go" {
			continue
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && slices.Contains(cloudNames, unquote(lit.Value)) {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	if len(names) != len(cloudNames) {
		t.Fatalf("config.go declares constants for %d of the %d cloud names %v: %v", len(names), len(cloudNames), cloudNames, names)
	}
	// The package's files, and the workloads' entries, which take the stack's cloud from it too.
	files := pkgs["stacks"].Files
	dirs, _ := filepath.Glob("workloads/*")
	for _, dir := range append([]string{"workloads"}, dirs...) {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		wl, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range wl {
			maps.Copy(files, p.Files)
		}
	}
	for _, f := range files {
		file := fset.File(f.Pos()).Name()
		ast.Inspect(f, func(n ast.Node) bool {
			var what string
			switch n := n.(type) {
			case *ast.Ident:
				if names[n.Name] && file != "config.go" {
					what = "names cloud " + n.Name
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && slices.Contains(cloudNames, unquote(n.Value)) && file != "config.go" {
					what = "spells cloud " + n.Value
				}
			case *ast.SwitchStmt:
				if sel, ok := n.Tag.(*ast.SelectorExpr); ok && sel.Sel.Name == "Cloud" {
					what = "switches on the cloud"
				}
			}
			if what != "" {
				t.Errorf("%s %s: ask the cloud's entry (CloudEntry) instead, and answer in stacks/clouds/<name>", fset.Position(n.Pos()), what)
			}
			return true
		})
	}
}

func unquote(s string) string {
	v, err := strconv.Unquote(s)
	if err != nil {
		return s
	}
	return v
}

// TestNoCloudsRefused: without the clouds' entries (kolotoc/stacks/clouds not imported) the stack
// refuses to run, rather than refusing every stack's cloud as unknown.
func TestNoCloudsRefused(t *testing.T) {
	saved := clouds
	defer func() { clouds = saved }()
	clouds = nil
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `import _ "kolotoc/stacks/clouds"`) {
			t.Errorf("CloudEntry without entries: recovered %v, want the panic that names the import", r)
		}
	}()
	_ = (&Config{Cloud: CloudSimulated}).CloudEntry()
	t.Error("CloudEntry ran without any cloud registered")
}
