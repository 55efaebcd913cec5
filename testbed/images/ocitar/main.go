// Command ocitar writes a one-layer OCI image-layout tarball:
//
//	ocitar -config FRAGMENT.json -ref REGISTRY/NAME:TAG -out IMAGE.tar < rootfs.tar
//
// It reads an uncompressed rootfs tar on stdin (checking that it is a well-formed tar), gzips it
// into the layer, and writes oci-layout, index.json (whose manifest descriptor carries the
// io.containerd.image.name and org.opencontainers.image.ref.name annotations, as
// `ctr images import` reads them), the manifest, the config (the FRAGMENT as its "config") and the
// layer blob, and prints one summary line on stdout. The output is deterministic for a given
// rootfs and fragment. It writes -out in place; the caller renames it into its final path.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// fragmentKeys are the image config fields a recipe's config.json may set.
var fragmentKeys = map[string]bool{
	"Entrypoint": true, "Cmd": true, "Env": true, "WorkingDir": true, "User": true,
	"ExposedPorts": true, "Labels": true, "StopSignal": true, "Volumes": true,
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func main() {
	configPath := flag.String("config", "", "the recipe's config.json (OCI image config fragment)")
	ref := flag.String("ref", "", "full image reference, REGISTRY/NAME:TAG")
	out := flag.String("out", "", "output tarball")
	arch := flag.String("arch", runtime.GOARCH, "image architecture")
	flag.Parse()
	if *configPath == "" || *ref == "" || *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*configPath, *ref, *out, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "ocitar:", err)
		os.Exit(1)
	}
}

func run(configPath, ref, out, arch string) error {
	colon := strings.LastIndex(ref, ":")
	if colon < 0 || strings.Contains(ref[colon:], "/") {
		return fmt.Errorf("ref %q has no tag", ref)
	}
	tag := ref[colon+1:]
	fragment, err := readFragment(configPath)
	if err != nil {
		return err
	}

	// The layer: gzip the rootfs into a temporary file beside the output, hashing both forms.
	layerFile, err := os.CreateTemp(filepath.Dir(out), ".layer-*")
	if err != nil {
		return err
	}
	defer os.Remove(layerFile.Name())
	defer layerFile.Close()
	compressed := sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(layerFile, compressed), gzip.DefaultCompression)
	if err != nil {
		return err
	}
	uncompressed := sha256.New()
	entries, size, err := copyTar(io.MultiWriter(zw, uncompressed), os.Stdin)
	if err != nil {
		return fmt.Errorf("rootfs tar on stdin: %w", err)
	}
	if err := zw.Close(); err != nil {
		return err
	}
	layerSize, err := layerFile.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	layer := descriptor{MediaType: mediaLayer, Digest: digest(compressed), Size: layerSize}

	config, err := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           "linux",
		"config":       fragment,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digest(uncompressed)}},
		"history":      []map[string]string{{"created_by": "testbed/images/images.sh build " + ref}},
	})
	if err != nil {
		return err
	}
	configDesc := descriptor{MediaType: mediaConfig, Digest: digestOf(config), Size: int64(len(config))}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        configDesc,
		"layers":        []descriptor{layer},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{
			MediaType: mediaManifest, Digest: digestOf(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{
				"io.containerd.image.name":          ref,
				"org.opencontainers.image.ref.name": tag,
			},
			Platform: &platform{Architecture: arch, OS: "linux"},
		}},
	})
	if err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	dirs := []string{"blobs/", "blobs/sha256/"}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	small := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(configDesc.Digest), config},
		{blobPath(digestOf(manifest)), manifest},
	}
	for _, s := range small {
		if err := writeEntry(tw, s.name, int64(len(s.data)), bytes.NewReader(s.data)); err != nil {
			return err
		}
	}
	if _, err := layerFile.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := writeEntry(tw, blobPath(layer.Digest), layerSize, layerFile); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("%d entries, rootfs %.1f MB, layer %.1f MB\n", entries, float64(size)/1e6, float64(layerSize)/1e6)
	return nil
}

// readFragment reads the recipe's config fragment, refusing fields an image config does not have
// (a typo would otherwise be dropped silently).
func readFragment(path string) (map[string]json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var fragment map[string]json.RawMessage
	if err := json.Unmarshal(data, &fragment); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var unknown []string
	for k := range fragment {
		if !fragmentKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%s: unknown image config fields %s", path, strings.Join(unknown, ", "))
	}
	return fragment, nil
}

// copyTar copies a tar stream from r to w, parsing it as it goes so that a truncated or corrupt
// stream is an error; it returns the number of entries and of bytes copied.
func copyTar(w io.Writer, r io.Reader) (entries int, size int64, err error) {
	cw := &countWriter{w: w}
	tr := tar.NewReader(io.TeeReader(r, cw))
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		entries++
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return 0, 0, err
		}
	}
	if entries == 0 {
		return 0, 0, errors.New("empty tar")
	}
	// Keep the end-of-archive padding, as the producer wrote it.
	if _, err := io.Copy(cw, r); err != nil {
		return 0, 0, err
	}
	return entries, cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func writeEntry(tw *tar.Writer, name string, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}

func digest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }
