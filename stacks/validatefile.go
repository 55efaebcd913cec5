package stacks

import (
	"errors"
	"strings"
)

// ValidateStackFile is what the program's Load says of a stack file for that stack, its secret
// keys aside: the file does not hold them (they live encrypted, or in the test bed's secrets
// file), so a problem of a secret key (missing, empty) is not reported. make fit runs it (the
// program's `validate` mode, main.go) before it mirrors a stack, so that a stack its own cloud
// would refuse (an uncatalogued machine type without its shape, …) is refused, not mirrored with
// made-up figures and reported as fitting. nil: the stack loads.
func ValidateStackFile(path, project, stack string) ([]FieldError, error) {
	raw, err := ReadStackFile(path, project, stack, "")
	if err != nil {
		return nil, err
	}
	_, err = Load(raw)
	var ce *ConfigError
	if err == nil || !errors.As(err, &ce) {
		return nil, err
	}
	secret := map[string]bool{}
	for _, k := range secretKeys {
		secret[k] = true
	}
	var out []FieldError
	for _, fe := range ce.Errors {
		top := fe.Key
		if i := strings.IndexAny(top, ".["); i >= 0 {
			top = top[:i]
		}
		if !secret[top] {
			out = append(out, fe)
		}
	}
	return out, nil
}
