package stacks

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi"

// What the package's external tests (package stacks_test) read of its insides. Those tests load
// or deploy whole stacks, which needs the workloads' entries (kolotoc/stacks/workloads); the
// entries import this package, so those tests cannot be in it.

const (
	ReadOutputsAttempts = readOutputsAttempts
	ReadStackOutputs    = readStackOutputs
)

var (
	CloudNames            = cloudNames
	ApplyDefaults         = (*Config).applyDefaults
	DeployCloud           = deployCloud
	GuardStorage          = guardStorage
	SecretKeys            = secretKeys
	ValidateCodeTransport = (*Config).validateCodeTransport
)

// IsConfigKey reports whether key is a key of Config (a tagged field).
func IsConfigKey(key string) bool { _, ok := configKeys[key]; return ok }

// ConfigIndex is the position of key's field in Config: the order Register keeps.
func ConfigIndex(key string) int { return configKeys[key].index }

// Registered are the registered workloads, in order.
func Registered() []*Workload { return workloads }

// CloudExports are the stack outputs of a cloud's resources.
func CloudExports(r *CloudResult) pulumi.Map { return r.exports() }

// RegisteredClouds are the registered clouds, in order.
func RegisteredClouds() []*Cloud { return clouds }

// Errors are the problems a Validator found.
func (v *Validator) Errors() []FieldError { return v.errs }
