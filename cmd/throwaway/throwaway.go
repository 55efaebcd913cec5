// Package throwaway runs the real Pulumi CLI and engine on a stack that exists for one check only
// (make fit's mirror, bench/scale's sizes): a project directory of its own under .kolotoc/ whose
// Pulumi.yaml names the program in the project root, a file backend and a random passphrase of
// its own, and throw-away secrets. The project's stacks, their files and their state are never
// touched. The environment is `testbed/stack/stack.sh env`'s (pulumi and its plugins on PATH).
package throwaway

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Stack is one throw-away stack.
type Stack struct {
	Root        string    // the project directory: Pulumi.yaml and the program
	Dir         string    // the throw-away project directory (created by Create, removed by Remove)
	Name        string    // the stack's name
	Description string    // written into its Pulumi.yaml: who made it and why
	Log         io.Writer // every command and its output (nil: nowhere)
}

// Exists reports whether Create wrote the stack's project directory (a run that died before
// Remove leaves it behind).
func (s *Stack) Exists() bool {
	_, err := os.Stat(filepath.Join(s.Dir, "Pulumi.yaml"))
	return err == nil
}

// Create writes the project directory (Pulumi.yaml naming the program, the stack's config file,
// a passphrase, a state directory), creates the stack and sets its secrets.
func (s *Stack) Create(configFile []byte, secrets map[string]string) error {
	if err := os.MkdirAll(filepath.Join(s.Dir, "state"), 0o700); err != nil {
		return err
	}
	pass, err := RandomHex(32)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "passphrase"), []byte(pass), 0o600); err != nil {
		return err
	}
	project, err := os.ReadFile(filepath.Join(s.Root, "Pulumi.yaml"))
	if err != nil {
		return err
	}
	var proj struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal(project, &proj); err != nil || proj.Name == "" {
		return fmt.Errorf("Pulumi.yaml: no project name (%v)", err)
	}
	shadow, err := yaml.Marshal(map[string]any{
		"name":        proj.Name,
		"description": s.Description,
		"runtime":     "go",
		"main":        s.Root, // the program itself; this directory holds the stack's config alone
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "Pulumi.yaml"), shadow, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "Pulumi."+s.Name+".yaml"), configFile, 0o600); err != nil {
		return err
	}
	if out, err := s.Pulumi("", "stack", "init"); err != nil {
		return fmt.Errorf("pulumi stack init: %w\n%s", err, Tail(out, 10))
	}
	for k, v := range secrets {
		if out, err := s.Pulumi(v, "config", "set", "--secret", k); err != nil {
			return fmt.Errorf("pulumi config set --secret %s: %w\n%s", k, err, Tail(out, 10))
		}
	}
	return nil
}

// Destroy runs pulumi destroy and removes the stack. A run killed mid-update leaves its lock:
// it is cancelled and the destroy tried once more.
func (s *Stack) Destroy() error {
	if !s.Exists() {
		return nil
	}
	if out, err := s.Pulumi("", "destroy", "--yes", "--skip-preview"); err != nil {
		_, _ = s.Pulumi("", "cancel", "--yes")
		if _, err2 := s.Pulumi("", "destroy", "--yes", "--skip-preview"); err2 != nil &&
			!strings.Contains(out, "no stack named") {
			return fmt.Errorf("pulumi destroy: %w\n%s", err, Tail(out, 20))
		}
	}
	_, _ = s.Pulumi("", "stack", "rm", "--yes", "--force")
	return nil
}

// Remove deletes the project directory (after Destroy).
func (s *Stack) Remove() error { return os.RemoveAll(s.Dir) }

// Pulumi runs the CLI on the stack, with its own backend and passphrase; the output goes to the
// log and is returned. It is never killed: an interrupted update must finish writing its state
// (the terminal's Ctrl-C reaches pulumi too, which stops it cleanly), so that a destroy is exact.
func (s *Stack) Pulumi(stdin string, args ...string) (string, error) {
	var out bytes.Buffer
	err := s.run(&out, true, stdin, args...)
	return out.String(), err
}

// Quiet runs the CLI like Pulumi but keeps its standard output out of the log (for output that
// holds secrets, e.g. `stack export --show-secrets`); the standard error is logged.
func (s *Stack) Quiet(stdin string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := s.run(&out, false, stdin, args...)
	return out.Bytes(), err
}

func (s *Stack) run(out *bytes.Buffer, logStdout bool, stdin string, args ...string) error {
	args = append(args, "--cwd", s.Dir, "--stack", s.Name, "--non-interactive")
	cmd := exec.Command("pulumi", args...)
	cmd.Env = s.Env()
	cmd.Stdin = strings.NewReader(stdin)
	var errBuf bytes.Buffer
	stdout, stderr := io.Writer(out), io.Writer(out)
	if !logStdout {
		stderr = &errBuf
	}
	if s.Log != nil {
		fmt.Fprintf(s.Log, "\n$ pulumi %s\n", strings.Join(args, " "))
		if logStdout {
			stdout = io.MultiWriter(out, s.Log)
		}
		stderr = io.MultiWriter(stderr, s.Log)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("exit status %d", exit.ExitCode())
		if !logStdout {
			err = fmt.Errorf("%w: %s", err, Tail(errBuf.String(), 10))
		}
	}
	return err
}

// Env is the caller's environment with the stack's backend and passphrase in place of any other.
func (s *Stack) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE":
		default:
			env = append(env, kv)
		}
	}
	env = append(env,
		"PULUMI_BACKEND_URL=file://"+filepath.Join(s.Dir, "state"),
		"PULUMI_CONFIG_PASSPHRASE_FILE="+filepath.Join(s.Dir, "passphrase"),
		// The test bed's Go language host (v3.66, testbed/tools/tools.sh) builds the program with `go
		// build` at every command, which links it again (about 40 s); with this it uses `go run`,
		// whose executable Go caches, so only the first command after a change pays the link.
		"PULUMI_GO_USE_RUN=true",
	)
	for _, kv := range []string{"PULUMI_SKIP_UPDATE_CHECK=true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true"} {
		if k, _, _ := strings.Cut(kv, "="); os.Getenv(k) == "" {
			env = append(env, kv)
		}
	}
	return env
}

// RandomHex returns n random bytes in hex (a throw-away secret of 8n bits).
func RandomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Certificate returns a self-signed certificate for name and its PEM key, valid for a day: a
// throw-away stand-in for a stack's own (make fit's mirrors, previews' copies).
func Certificate(name string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})), nil
}
