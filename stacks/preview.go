package stacks

import "strings"

// A preview copy (cmd/previewstack) is the stack <name>-preview holding <name>'s state with
// every secret replaced, and configuration with throw-away secrets and kolotoc:previewOf: <name>.
// Pull-request previews run on it, so they never hold what decrypts the stack's secrets (issue 30,
// docs/operating/ci-previews.md). The program then names everything as <name> does (the
// stack name is in the namespace, the labels, the cloud resources' names), so that the preview
// shows the pull request's changes and not a rename; and it refuses to deploy: a copy's secrets
// are throw-away values, and an update would write them into the cluster.

// previewOfKey is the full config key.
const previewOfKey = ConfigNamespace + ":previewOf"

// previewCopy applies kolotoc:previewOf to raw before Load: the copy of stack S must be the stack
// S-preview, and only previews (dryRun) run on it.
func previewCopy(raw *Raw, dryRun bool) error {
	of, set := raw.Values[previewOfKey]
	if !set || of == projectDefaults["previewOf"] { // Pulumi.yaml's default: unset (keys.go)
		return nil
	}
	var msg string
	switch {
	case strings.ContainsAny(of, "/: "):
		msg = "not a stack name; allowed: the name of the stack this one is the preview copy of (set by cmd/previewstack prepare)"
	case raw.Stack != of+"-preview":
		msg = "the preview copy of " + of + " is the stack " + of + "-preview, not " + raw.Stack + "; allowed: set only by cmd/previewstack prepare"
	case !dryRun:
		msg = "this stack is the preview copy of " + of + ": its secrets are throw-away values, so it is never deployed; allowed: pulumi preview only (deploy " + of + " itself)"
	default:
		raw.Stack = of
		return nil
	}
	return &ConfigError{Stack: raw.Stack, Errors: []FieldError{{Key: "previewOf", Value: of, Msg: msg}}}
}
