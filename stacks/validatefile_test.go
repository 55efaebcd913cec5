package stacks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kolotoc/stacks"
)

// TestValidateStackFile: make fit's first step (the program's validate mode) reports what `pulumi
// up` of the stack itself would refuse, its secrets aside: the committed stacks and the azure
// example load (their secrets are not in their files); the azure example with a CPU pool of a
// machine type Kolotoc's azure catalogue does not know (Standard_D4s_v3) and no shape is refused,
// keyed, as the azure stack refuses it (make fit used to mirror it with 8 made-up cores and 32Gi
// and report it as fitting).
func TestValidateStackFile(t *testing.T) {
	for stack, path := range map[string]string{"dev": "../Pulumi.dev.yaml", "prod": "../Pulumi.prod.yaml", "azure": "../examples/azure/Pulumi.azure.yaml"} {
		if problems, err := stacks.ValidateStackFile(path, "kolotoc", stack); err != nil || len(problems) != 0 {
			t.Errorf("%s: %v %v; want no problem", path, err, problems)
		}
	}
	b, err := os.ReadFile("../examples/azure/Pulumi.azure.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	i := strings.Index(src, "Standard_D")
	if i < 0 {
		t.Fatal("the azure example has no Standard_D… CPU pool to change")
	}
	j := i + strings.IndexAny(src[i:], " \n")
	path := filepath.Join(t.TempDir(), "Pulumi.azure.yaml")
	if err := os.WriteFile(path, []byte(src[:i]+"Standard_D4s_v3"+src[j:]), 0o600); err != nil {
		t.Fatal(err)
	}
	problems, err := stacks.ValidateStackFile(path, "kolotoc", "azure")
	if err != nil || len(problems) != 1 || !strings.HasSuffix(problems[0].Key, ".machineType") || problems[0].Value != "Standard_D4s_v3" ||
		!strings.Contains(problems[0].Msg, "not in Kolotoc's azure catalogue") {
		t.Errorf("azure with Standard_D4s_v3: %v %v; want its machineType refused as the azure stack refuses it", err, problems)
	}
}
