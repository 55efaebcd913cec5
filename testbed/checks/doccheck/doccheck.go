// Package doccheck reads the shell commands of the docs (README.md and docs/**/*.md) for the tests
// that keep them true. Every fenced shell block says how it is checked, in its info string:
//
//	```sh {exec}                  run as written, in order, by tests/e2e (TestDocCommands)
//	```sh {exec=unit}             run as written by `go test ./testbed/checks/doccheck` (no cluster)
//	```sh {tested: <file>}        each command line appears verbatim in that test file, which runs it
//	```sh {illustrative: <why>}   not run; why says what it needs (a cloud, your cluster, a terminal)
//
// A shell block with none of these fails the tests, so a new command is either run or says why not.
// YAML blocks that are whole stack files (config: with kolotoc:cloud) are loaded and validated by
// the program's own Load, unless marked {refused: <key>}, which must be refused naming that key.
package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Block is one fenced code block.
type Block struct {
	File   string // relative to the project directory
	Line   int    // of the opening fence, 1-based
	Lang   string // sh, yaml, …
	Marker string // exec, exec=unit, tested, illustrative, refused, or ""
	Arg    string // what follows "tested:", "illustrative:" or "refused:"
	Body   string
}

// Where is file:line, for test messages.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// ShellLangs are the info strings of shell blocks.
var ShellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Files are the documentation files below root: README.md and docs/**/*.md, sorted.
func Files(root string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files[1:])
	return files, err
}

// Blocks are the fenced blocks of every documentation file, in file order.
func Blocks(root string) ([]Block, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, f := range files {
		bs, err := FileBlocks(root, f)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	return out, nil
}

// FileBlocks are the fenced blocks of one file.
func FileBlocks(root, file string) ([]Block, error) {
	fh, err := os.Open(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []Block
	var cur *Block
	var indent string
	var body []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				indent = line[:len(line)-len(trimmed)]
				info := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
				b := Block{File: file, Line: n}
				b.Lang, b.Marker, b.Arg = parseInfo(info)
				cur = &b
				body = nil
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") && strings.TrimSpace(trimmed) == "```" {
			cur.Body = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
			continue
		}
		body = append(body, strings.TrimPrefix(line, indent))
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a fenced block that is never closed", file, cur.Line)
	}
	return out, sc.Err()
}

// parseInfo splits "sh {illustrative: why}" into sh, illustrative, why.
func parseInfo(info string) (lang, marker, arg string) {
	lang, rest, _ := strings.Cut(info, " ")
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "{") || !strings.HasSuffix(rest, "}") {
		return lang, "", ""
	}
	rest = strings.TrimSpace(rest[1 : len(rest)-1])
	marker, arg, _ = strings.Cut(rest, ":")
	return lang, strings.TrimSpace(marker), strings.TrimSpace(arg)
}

// Commands are a shell block's command lines: without comments, blank lines and prompts.
func (b Block) Commands() []string {
	var out []string
	for _, l := range strings.Split(b.Body, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}
