package doccheck

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads" // the workloads' entries, as main.go registers them
)

const root = "../../.."

// maxReadmeLines: the README says what Kolotoc is and how to start; the rest is in docs/.
const maxReadmeLines = 250

func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to docs/", n, maxReadmeLines)
	}
}

// Every shell block of the docs says how it is checked (package comment), and the reason of an
// illustrative one is given.
func TestShellBlocksMarked(t *testing.T) {
	blocks, err := Blocks(root)
	if err != nil {
		t.Fatal(err)
	}
	var shell int
	for _, b := range blocks {
		if !ShellLangs[b.Lang] {
			continue
		}
		shell++
		switch b.Marker {
		case "exec", "exec=unit":
		case "tested":
			if b.Arg == "" {
				t.Errorf("%s: {tested: <file>} names no file", b.Where())
			}
		case "illustrative":
			if len(b.Arg) < 10 {
				t.Errorf("%s: {illustrative: <why>} says no reason", b.Where())
			}
		default:
			t.Errorf("%s: a shell block without {exec}, {exec=unit}, {tested: <file>} or {illustrative: <why>} (testbed/checks/doccheck)", b.Where())
		}
	}
	if shell == 0 {
		t.Fatal("no shell block found: the parser is broken")
	}
}

// A {tested: <file>} block's command lines appear verbatim in that file, which runs them.
func TestTestedBlocksVerbatim(t *testing.T) {
	blocks, err := Blocks(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Marker != "tested" {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, b.Arg))
		if err != nil {
			t.Errorf("%s: %v", b.Where(), err)
			continue
		}
		for _, c := range b.Commands() {
			if !strings.Contains(string(src), c) {
				t.Errorf("%s: %q is not in %s, which is said to run it", b.Where(), c, b.Arg)
			}
		}
	}
}

// The {exec=unit} blocks run as written, from the project directory, without a cluster.
func TestUnitBlocksRun(t *testing.T) {
	blocks, err := Blocks(root)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(root)
	for _, b := range blocks {
		if b.Marker != "exec=unit" {
			continue
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.Body)
		cmd.Dir = abs
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s\n%s", b.Where(), err, b.Body, out)
		}
	}
}

// placeholderSecrets are the secret keys a stack file in the docs may need, as set by hand.
var placeholderSecrets = map[string]string{
	"kolotoc:sshKeySeed":      "9f2c4e7a1b8d3f6052e9a7c1d4b8f3e6a0c5d9e2f7b1a4c8e3d6f9a2b5c7e1d4",
	"kolotoc:jupyterPassword": "a-doc-password-0123",
	"kolotoc:grafanaPassword": "a-doc-password-0123",
}

// Every whole stack file shown in the docs (a YAML block with config: and kolotoc:cloud) is
// accepted by the program's validation, as a user copying it would find; one marked
// {refused: <key>} is refused, naming that key.
func TestStackFilesInDocsLoad(t *testing.T) {
	blocks, err := Blocks(root)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, b := range blocks {
		if b.Lang != "yaml" || !strings.Contains(b.Body, "kolotoc:cloud:") || !regexp.MustCompile(`(?m)^config:`).MatchString(b.Body) {
			continue
		}
		n++
		dir := t.TempDir()
		f := filepath.Join(dir, "Pulumi.doc.yaml")
		if err := os.WriteFile(f, []byte(b.Body), 0o600); err != nil {
			t.Fatal(err)
		}
		raw, err := stacks.ReadStackFile(f, "kolotoc", "doc", "")
		if err != nil {
			t.Errorf("%s: %v", b.Where(), err)
			continue
		}
		for k, v := range placeholderSecrets {
			raw.Values[k], raw.Secrets[k] = v, true
		}
		_, err = stacks.Load(raw)
		var ce *stacks.ConfigError
		switch {
		case b.Marker == "refused":
			if !errors.As(err, &ce) || !hasKey(ce, b.Arg) {
				t.Errorf("%s: want it refused naming kolotoc:%s, got %v", b.Where(), b.Arg, err)
			}
		case err != nil:
			t.Errorf("%s: the stack file the docs show is refused:\n%v", b.Where(), err)
		}
	}
	if n == 0 {
		t.Fatal("no stack file found in the docs: the parser is broken")
	}
}

func hasKey(ce *stacks.ConfigError, key string) bool {
	for _, fe := range ce.Errors {
		if fe.Key == key {
			return true
		}
	}
	return false
}

// pending are pages other branches add; the index links them before they land.
var pending = map[string]bool{"docs/queueing.md": true, "docs/migrating-features.md": true, "docs/recovery.md": true}

var link = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// Every relative link of the docs reaches a file of the checkout (or a page another branch adds).
func TestRelativeLinksResolve(t *testing.T) {
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := stripFences(string(b))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			if pending[p] {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: link %s: %v", f, target, err)
			}
		}
	}
}

func stripFences(s string) string {
	var out []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
