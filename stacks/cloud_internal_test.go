package stacks

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNoBranchOnTheCloud: the package asks the stack's cloud entry (CloudEntry, cloud.go) and
// never names a cloud itself. The names of kolotoc:cloud are declared once, in config.go; outside
// it no file of the package or of the workloads' entries (tests aside) may use those constants or
// spell a cloud's name as a string, nor switch on a Cloud field. A branch on the cloud belongs in
// the cloud's entry, stacks/clouds/<name>, which answers for every cloud the same question.
func TestNoBranchOnTheCloud(t *testing.T) {
	// The package's files, and the workloads' entries, which take the stack's cloud from it too.
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, pattern := range []string{"*.go", "workloads/*.go", "workloads/*/*.go"} {
		names, _ := filepath.Glob(pattern)
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = f
		}
	}
	// The constants config.go declares for the names in cloudNames.
	names := map[string]bool{}
	if files["config.go"] == nil {
		t.Fatal("no config.go")
	}
	for _, d := range files["config.go"].Decls {
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
	if len(names) != len(cloudNames) {
		t.Fatalf("config.go declares constants for %d of the %d cloud names %v: %v", len(names), len(cloudNames), cloudNames, names)
	}
	for file, f := range files {
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
