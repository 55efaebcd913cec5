package kueuechart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TemplateToken is the Kubernetes provider's invoke that renders a chart for helm.v3.Chart.
const TemplateToken = "kubernetes:helm:template"

// Opts is what the program sends in the invoke's jsonOpts: the fields of the provider's
// HelmChartOpts (pulumi-kubernetes v4.25.0, provider/pkg/provider/invoke_helm_template.go) that
// a chart from an OCI registry uses.
type Opts struct {
	Chart            string         `json:"chart"`
	Version          string         `json:"version"`
	Namespace        string         `json:"namespace"`
	ReleaseName      string         `json:"release_name"`
	Values           map[string]any `json:"values"`
	SkipCRDRendering bool           `json:"skip_crd_rendering"`
	APIVersions      []string       `json:"api_versions"`
	KubeVersion      string         `json:"kube_version"`
}

// ModuleDir is the directory of a Go module version in the module cache, downloaded through the
// module proxy when missing (Kueue's module holds its chart, charts/kueue).
func ModuleDir(module, version string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", module+"@"+version).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, m.Error)
	}
	return m.Dir, nil
}

// testHook is the provider's test for a test hook's manifest, which it leaves out.
var testHook = regexp.MustCompile(`"?helm.sh/hook"?:.*test`)

// Render is the provider's `helm template` of the chart in dir, as its invoke does it for a chart
// it pulled: an install, client-only and dry-run, of the release opts names (Helm's
// action.Install renders the CRDs of crds/, then the templates in install order, then the hooks),
// and the manifest decoded into objects, each namespaced object without a namespace put in
// opts.Namespace. The chart in dir must be the one opts names (its name and version).
func Render(dir string, o Opts) ([]any, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	if name := path.Base(o.Chart); name != ch.Name() || o.Version != ch.Metadata.Version {
		return nil, fmt.Errorf("the program asks for chart %s version %s; %s holds %s %s", o.Chart, o.Version, dir, ch.Name(), ch.Metadata.Version)
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if o.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return nil, err
		}
		caps.KubeVersion = *kv
	}
	if len(o.APIVersions) > 0 {
		caps.APIVersions = append(caps.APIVersions, o.APIVersions...)
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, o.Values); err != nil {
		return nil, err
	}
	values, err := chartutil.ToRenderValues(ch, o.Values,
		chartutil.ReleaseOptions{Name: o.ReleaseName, Namespace: o.Namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, values)
	if err != nil {
		return nil, err
	}
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if !o.SkipCRDRendering {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	for _, h := range hooks {
		if !testHook.MatchString(h.Manifest) {
			fmt.Fprintf(&b, "\n---\n%s", h.Manifest)
		}
	}
	return decode(b.String(), o.Namespace)
}

// clusterScoped are the kinds of cluster-wide objects a chart may hold (the provider asks the
// cluster; a chart's namespaced objects all name their namespace here anyway).
var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true, "APIService": true,
	"PriorityClass": true, "FlowSchema": true, "PriorityLevelConfiguration": true,
}

// decode is the provider's decodeYaml: every document with a kind and an apiVersion.
func decode(text, namespace string) ([]any, error) {
	dec := k8syaml.NewYAMLOrJSONDecoder(io.NopCloser(strings.NewReader(text)), 128)
	var out []any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, err
		}
		if obj["kind"] == nil || obj["apiVersion"] == nil {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		if md != nil && md["namespace"] == nil && !clusterScoped[fmt.Sprint(obj["kind"])] {
			md["namespace"] = namespace
		}
		out = append(out, obj)
	}
}

// ChartDir is charts/<name> of a module directory.
func ChartDir(moduleDir, name string) string { return filepath.Join(moduleDir, "charts", name) }
