// Command previewstack keeps a stack's preview copy, so that pull-request previews run with
// neither the stack's secrets nor what decrypts them (issue 30; docs/ci.md "What a preview can
// still read"). The copy is a stack of its own, <stack>-preview, in the same backend: the stack's
// state with every secret replaced, encrypted with a passphrase of its own, and a configuration
// with throw-away values for every secret. The program knows the copy by kolotoc:previewOf, names
// its objects as the stack does, and refuses to deploy it.
//
//	previewstack copy --stack prod
//	    deploy workflow, after `pulumi up` of prod (trusted: the default branch only). Needs the
//	    stack's passphrase (PULUMI_CONFIG_PASSPHRASE) and the copy's (PREVIEW_CONFIG_PASSPHRASE;
//	    unset: the backend's own secrets provider). Exports prod with --show-secrets into memory,
//	    scrubs it (scrub.go), creates prod-preview if missing, and imports the scrubbed state.
//	previewstack prepare --stack prod
//	    preview workflow, on the pull request's checkout, with the copy's passphrase only
//	    (PULUMI_CONFIG_PASSPHRASE). Writes Pulumi.prod-preview.yaml from the pull request's
//	    Pulumi.prod.yaml (plain values as they are, kolotoc:previewOf: prod) and sets a throw-away
//	    value for each secure key (PREVIEW_SECRETS, a JSON object of key to value, may give some,
//	    e.g. a read-only kubeconfig for an existing cluster). Then `pulumi preview --stack
//	    prod-preview --diff` shows what the pull request changes.
//
// It runs `pulumi` from PATH in the current directory (the project's); nothing it handles is
// printed, only counts.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	stack := fs.String("stack", "", "the stack to copy or preview (e.g. prod, or org/prod)")
	preview := fs.String("preview", "", "its preview copy (default <stack>-preview)")
	_ = fs.Parse(os.Args[2:])
	if *stack == "" {
		usage()
	}
	if *preview == "" {
		*preview = *stack + "-preview"
	}
	var err error
	switch os.Args[1] {
	case "copy":
		err = copyStack(*stack, *preview)
	case "prepare":
		err = prepare(*stack, *preview)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "previewstack:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: previewstack copy|prepare --stack STACK [--preview STACK-preview]")
	os.Exit(2)
}

// short is a stack's name as URNs carry it (org/project/stack → stack).
func short(stack string) string { return stack[strings.LastIndex(stack, "/")+1:] }

// env is this process's environment with the passphrase settings replaced: pass "" keeps none
// (the backend's own secrets provider), fallback lets the CLI take the passphrase provider's salt
// from the state when the stack file lacks it.
func env(pass string, set bool) []string {
	var out []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", "PREVIEW_CONFIG_PASSPHRASE", "PREVIEW_SECRETS":
		default:
			out = append(out, kv)
		}
	}
	if set {
		out = append(out, "PULUMI_CONFIG_PASSPHRASE="+pass)
	}
	return append(out, "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true")
}

// pulumi runs the CLI; its standard output is returned and never printed (an export holds
// secrets), its standard error only on failure, cut short.
func pulumi(environ []string, stdin []byte, args ...string) ([]byte, error) {
	args = append(args, "--non-interactive")
	cmd := exec.Command("pulumi", args...)
	cmd.Env = environ
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		return nil, fmt.Errorf("pulumi %s: %v\n%s", strings.Join(args[:min(len(args), 3)], " "), err, msg)
	}
	return out.Bytes(), nil
}

func copyStack(stack, preview string) error {
	src := env(os.Getenv("PULUMI_CONFIG_PASSPHRASE"), os.Getenv("PULUMI_CONFIG_PASSPHRASE") != "")
	if os.Getenv("PULUMI_CONFIG_PASSPHRASE_FILE") != "" {
		src = append(src, "PULUMI_CONFIG_PASSPHRASE_FILE="+os.Getenv("PULUMI_CONFIG_PASSPHRASE_FILE"))
	}
	pass, passSet := os.LookupEnv("PREVIEW_CONFIG_PASSPHRASE")
	dst := env(pass, passSet)
	if passSet && pass == os.Getenv("PULUMI_CONFIG_PASSPHRASE") {
		return errors.New("PREVIEW_CONFIG_PASSPHRASE is the stack's own passphrase: the copy must have one of its own")
	}

	export, err := pulumi(src, nil, "stack", "export", "--show-secrets", "--stack", stack)
	if err != nil {
		return err
	}
	// The copy's stack file: `stack init` writes the passphrase provider's salt there. Removed again
	// when this run made it (the salt is in the copy's state too), so a checkout stays as it was.
	file := "Pulumi." + short(preview) + ".yaml"
	_, statErr := os.Stat(file)
	if _, err := pulumi(dst, nil, "stack", "select", preview); err != nil {
		if _, err := pulumi(dst, nil, "stack", "init", preview); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "previewstack: created the preview copy %s\n", preview)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		defer os.Remove(file)
	}
	target, err := pulumi(dst, nil, "stack", "export", "--stack", preview)
	if err != nil {
		return err
	}
	scrubbed, rep, err := Scrub(export, target, short(stack), short(preview))
	if err != nil {
		return err
	}
	if _, err := pulumi(dst, scrubbed, "stack", "import", "--stack", preview); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "previewstack: %s → %s: %d resources, %d secrets replaced, %d kubeconfigs without credentials, %d pending operations left out\n",
		stack, preview, rep.Resources, rep.Secrets, rep.Kubeconfigs, rep.Pending)
	return nil
}

func prepare(stack, preview string) error {
	pass, passSet := os.LookupEnv("PULUMI_CONFIG_PASSPHRASE")
	dst := env(pass, passSet)
	if f := os.Getenv("PULUMI_CONFIG_PASSPHRASE_FILE"); f != "" {
		dst = append(dst, "PULUMI_CONFIG_PASSPHRASE_FILE="+f)
	}
	stackFile, err := os.ReadFile("Pulumi." + short(stack) + ".yaml")
	if err != nil {
		return err
	}
	cfg, secure, err := PreviewConfig(stackFile, short(stack))
	if err != nil {
		return err
	}
	given := map[string]string{}
	if s := os.Getenv("PREVIEW_SECRETS"); s != "" {
		if err := json.Unmarshal([]byte(s), &given); err != nil {
			return fmt.Errorf("PREVIEW_SECRETS: not a JSON object of config key to value: %v", err)
		}
	}
	secrets, cfg, notes, err := ThrowawaySecrets(cfg, secure, given)
	if err != nil {
		return err
	}
	if _, err := pulumi(dst, nil, "stack", "select", preview); err != nil {
		return fmt.Errorf("no preview copy %s: the deploy workflow makes it after each `pulumi up` of %s (previewstack copy)\n%w", preview, stack, err)
	}
	file := filepath.Join(".", "Pulumi."+short(preview)+".yaml")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		return err
	}
	for _, k := range secure {
		if _, err := pulumi(dst, []byte(secrets[k]), "config", "set", "--secret", k, "--stack", preview); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "previewstack: %s from Pulumi.%s.yaml, %d secure keys given throw-away values\n", file, short(stack), len(secure))
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "previewstack: note:", n)
	}
	return nil
}
