package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/esc"
	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/diag/colors"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"

	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads" // the workloads' entries, as main.go registers them
	"kolotoc/testbed/checks/stackfiles"
)

// root is the project directory, two levels up.
const root = "../../.."

// The committed reference and Pulumi.yaml's config block are what configref writes from the code
// now: a default, a type, an allowed value or a comment changed without `go run
// ./testbed/checks/configref` fails here, with the first line that differs.
func TestReferenceUpToDate(t *testing.T) {
	ref, err := Reference(root)
	if err != nil {
		t.Fatal(err)
	}
	project, err := os.ReadFile(filepath.Join(root, ProjectFile))
	if err != nil {
		t.Fatal(err)
	}
	wantProject, err := ProjectYAML(project, ref)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(root, ReferenceFile))
	if err != nil {
		t.Fatalf("%v (run: go run ./testbed/checks/configref)", err)
	}
	for _, f := range []struct {
		name      string
		got, want string
	}{{ReferenceFile, string(committed), Markdown(ref)}, {ProjectFile, string(project), string(wantProject)}} {
		if f.got != f.want {
			t.Errorf("%s differs from the code (run: go run ./testbed/checks/configref, then review the diff):\n%s", f.name, firstDiff(f.got, f.want))
		}
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  committed: %s\n  from code: %s", i+1, gl, wl)
		}
	}
	return ""
}

// Every committed stack passes the Pulumi CLI's own check of Pulumi.yaml's config types (the
// v3.250.0 code the CLI runs: workspace.ValidateStackConfigAndApplyProjectConfig), and with the
// project's defaults merged in, as `pulumi up` hands them to the program, loads exactly as without.
// https://www.pulumi.com/docs/iac/concepts/projects/project-file/#config-options
func TestProjectConfigAcceptsEveryStack(t *testing.T) {
	project, err := workspace.LoadProject(filepath.Join(root, ProjectFile))
	if err != nil {
		t.Fatalf("Pulumi.yaml refused by the CLI's schema: %v", err)
	}
	files, err := stackfiles.Committed(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "Pulumi."), ".yaml")
		t.Run(name, func(t *testing.T) {
			merged := mergedConfig(t, project, f, name)
			raw, err := stacks.ReadStackFile(f, "kolotoc", name, "")
			if err != nil {
				t.Fatal(err)
			}
			withDefaults := stacks.Raw{Project: raw.Project, Stack: raw.Stack, Values: merged, Secrets: raw.Secrets}
			stacks.DropProjectDefaults(&withDefaults) // as stacks.RawFromEnv does
			_, errPlain := stacks.Load(raw)
			_, errMerged := stacks.Load(withDefaults)
			if errString(errPlain) != errString(errMerged) {
				t.Errorf("Pulumi.yaml's defaults change how the stack loads:\nwithout: %v\n   with: %v", errPlain, errMerged)
			}
		})
	}
}

// The CLI refuses a stack that gives a key the wrong shape, or leaves out kolotoc:cloud: the
// declared types are checked before the program runs.
func TestProjectConfigRefusesWrongTypes(t *testing.T) {
	project, err := workspace.LoadProject(filepath.Join(root, ProjectFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"towers a number": "config:\n  kolotoc:cloud: simulated\n  kolotoc:towers: 3\n",
		"nodePools a map": "config:\n  kolotoc:cloud: simulated\n  kolotoc:nodePools: {name: a}\n",
		"runAsUser text":  "config:\n  kolotoc:cloud: simulated\n  kolotoc:runAsUser: nobody\n",
		"no cloud":        "config:\n  kolotoc:towers: {count: 1}\n",
	} {
		f := filepath.Join(t.TempDir(), "Pulumi.bad.yaml")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ps, err := workspace.LoadProjectStack(diag.DefaultSink(io.Discard, io.Discard, diag.FormatOptions{Color: colors.Never}), project, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := workspace.ValidateStackConfigAndApplyProjectConfig(context.Background(), "bad", project, esc.Value{},
			ps.Config, config.NopEncrypter, config.NopDecrypter); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// mergedConfig is the stack's kolotoc:* values after the CLI's check and merge of the project's
// config, as the program receives them (objects as JSON text).
func mergedConfig(t *testing.T, project *workspace.Project, file, name string) map[string]string {
	t.Helper()
	ps, err := workspace.LoadProjectStack(diag.DefaultSink(io.Discard, io.Discard, diag.FormatOptions{Color: colors.Never}), project, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := workspace.ValidateStackConfigAndApplyProjectConfig(context.Background(), name, project, esc.Value{},
		ps.Config, config.NopEncrypter, config.NopDecrypter); err != nil {
		t.Fatalf("the Pulumi CLI would refuse it: %v", err)
	}
	out := map[string]string{}
	for k, v := range ps.Config {
		if k.Namespace() != "kolotoc" {
			continue
		}
		s, err := v.Value(config.NopDecrypter)
		if err != nil {
			t.Fatal(err)
		}
		out[k.String()] = s
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
