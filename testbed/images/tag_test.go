// Package images holds the recipes of the real node's images (testbed/images/images.sh); this test
// checks the script's content tag against an independent implementation of its documented
// algorithm.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// recipeTag is the documented tag: the first 12 hex digits of the SHA-256, over every regular file
// of the recipe directory in byte-wise order of its slash-separated relative path, of
// <relpath> NUL <content> NUL.
func recipeTag(t *testing.T, dir string) string {
	t.Helper()
	var rels []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(rels) // Go compares strings byte-wise
	h := sha256.New()
	for _, rel := range rels {
		content, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(rel))
		h.Write([]byte{0})
		h.Write(content)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func TestImageTags(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(e.Name(), "config.json")); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	for _, want := range []string{"dask", "mpi", "pause"} {
		if !slices.Contains(names, want) {
			t.Errorf("no recipe testbed/images/%s/ (recipes: %v)", want, names)
		}
	}
	// The cache must not matter: point it at an empty directory.
	env := append(os.Environ(), "KOLOTOC_CACHE_DIR="+t.TempDir())
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("bash", "images.sh", "ref", name)
			cmd.Env = env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("images.sh ref %s: %v\n%s", name, err, stderr.String())
			}
			want := "kolotoc.local/" + name + ":" + recipeTag(t, name)
			if got := strings.TrimSpace(string(out)); got != want {
				t.Errorf("images.sh ref %s = %q, want %q", name, got, want)
			}
		})
	}
}

// TestImageTagOrder runs the script on a recipe whose paths sort differently by path and by
// directory walk ("a.b" < "a/b" byte-wise, '/' being 0x2f), with a space, a hidden and an empty
// file.
func TestImageTagOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"config.json": "{}", "a.b": "1", "a/b": "2", "a-c": "3", "a/b.c/d": "4",
		"files/x y": "5", ".hidden": "6", "empty": "",
	}
	for rel, content := range files {
		p := filepath.Join(dir, "tricky", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "images.sh", "ref", "tricky")
	cmd.Env = append(os.Environ(), "KOLOTOC_IMAGES_DIR="+dir, "KOLOTOC_CACHE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("images.sh ref tricky: %v\n%s", err, out)
	}
	want := "kolotoc.local/tricky:" + recipeTag(t, filepath.Join(dir, "tricky"))
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("images.sh ref tricky = %q, want %q", got, want)
	}
}

// TestGoRecipeBuildsNamedPackage: a Go recipe with go-build builds the package it names (here a
// main package below the recipe's module, as the prometheus recipe names one of a required
// module) to the path it names, the image's only file besides its directories.
func TestGoRecipeBuildsNamedPackage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for rel, content := range map[string]string{
		"gob/go.mod":            "module kolotoc.test/gob\n\ngo 1.22\n",
		"gob/cmd/hello/main.go": "package main\n\nfunc main() {}\n",
		"gob/go-build":          "kolotoc.test/gob/cmd/hello /usr/local/bin/hello\n",
		"gob/config.json":       `{"Entrypoint": ["/usr/local/bin/hello"]}`,
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "KOLOTOC_IMAGES_DIR="+dir, "KOLOTOC_CACHE_DIR="+t.TempDir())
	build := exec.Command("bash", "images.sh", "build", "gob")
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("images.sh build gob: %v\n%s", err, out)
	}
	path := exec.Command("bash", "images.sh", "path", "gob")
	path.Env = env
	out, err := path.Output()
	if err != nil {
		t.Fatal(err)
	}
	files := layerFiles(t, strings.TrimSpace(string(out)))
	if mode, ok := files["usr/local/bin/hello"]; !ok || mode&0o111 == 0 {
		t.Errorf("the image's layer holds %v; want usr/local/bin/hello, executable", files)
	}
	for name, mode := range files {
		if name != "usr/local/bin/hello" && !mode.IsDir() {
			t.Errorf("the image holds %s besides the binary", name)
		}
	}
}

// layerFiles lists the files of an OCI image tarball's layers (gzip tars), with their modes.
func layerFiles(t *testing.T, image string) map[string]fs.FileMode {
	t.Helper()
	f, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string]fs.FileMode{}
	outer := tar.NewReader(f)
	for {
		h, err := outer.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Name, "blobs/") || h.Typeflag != tar.TypeReg {
			continue
		}
		zr, err := gzip.NewReader(outer)
		if err != nil {
			continue // the config and manifests: JSON
		}
		inner := tar.NewReader(zr)
		for {
			ih, err := inner.Next()
			if err != nil {
				break
			}
			files[strings.TrimPrefix(path.Clean(ih.Name), "./")] = ih.FileInfo().Mode()
		}
	}
	return files
}

// The stacks that run on the real node name the local images by their current content tag: a
// recipe change without the matching stack change would leave `make up` asking for an image that
// is never built (the node only imports, never pulls).
func TestStacksUseCurrentLocalImages(t *testing.T) {
	t.Parallel()
	ref := regexp.MustCompile(`kolotoc\.local/([a-z0-9-]+):([0-9a-f]+)`)
	for _, file := range []string{"../../Pulumi.dev.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := ref.FindAllStringSubmatch(string(b), -1)
		if len(found) == 0 {
			t.Errorf("%s names no local image", file)
		}
		for _, m := range found {
			if want := recipeTag(t, m[1]); m[2] != want {
				t.Errorf("%s: %s, but recipe testbed/images/%s/ is tagged %s", file, m[0], m[1], want)
			}
		}
	}
}
