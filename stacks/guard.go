package stacks

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// StorageIdentityOutput is the stack output recording which shared storage the stack runs on:
// the configuration values (after defaults) whose change replaces the storage's claim, volume or
// cloud file store, and whether it was protected. It holds nothing secret.
const StorageIdentityOutput = "storageIdentity"

// readStackOutputs is the Pulumi engine's built-in function that returns a stack's last outputs.
// Called synchronously, before anything is registered, it lets the program compare a config
// change with what is deployed; with the file backend as with Pulumi Cloud it reads the last
// completed update, not the one in progress.
const readStackOutputs = "pulumi:pulumi:readStackOutputs"

// Keys the guard records beside the identity (RecordedIdentity).
const (
	// guardedKey is "true" while the guard holds: storage.protect was on, and no update has let
	// storage.allowReplace through since. Turning protect off does not clear it.
	guardedKey = "storage.guarded"
	// allowReplaceKey is "used" when the recorded update went through with storage.allowReplace.
	allowReplaceKey = "storage.allowReplace"
)

// guarded says whether the recorded update left the storage under the guard (an update by an
// older version recorded only storage.protect).
func guarded(previous map[string]string) bool {
	return previous[guardedKey] == "true" || previous["storage.protect"] == "true"
}

// RecordedIdentity is what an update records: the storage's identity, whether the guard still
// holds, and whether this update used storage.allowReplace.
func RecordedIdentity(c *Config, previous map[string]string) map[string]string {
	id := StorageIdentity(c)
	id[guardedKey] = strconv.FormatBool(c.Storage.Protect || (guarded(previous) && !c.Storage.AllowReplace))
	if c.Storage.AllowReplace {
		id[allowReplaceKey] = "used"
	}
	return id
}

// CheckStorageReplacement refuses a configuration that would replace storage deployed with
// storage.protect, unless storage.allowReplace is set. previous is the identity the last update
// recorded (nil for a stack never deployed, or deployed by a version that did not record it).
// Turning protect off does not get around it, in the same change (the engine allows unprotecting
// and replacing in one update, which is exactly the accident this guards against) or in an
// update before: the guard holds until an update goes through with allowReplace. And
// allowReplace lets one update through: left set, the next update is refused until it is removed.
func CheckStorageReplacement(c *Config, previous map[string]string) error {
	if c.Storage.AllowReplace {
		if previous[allowReplaceKey] == "used" {
			return &ConfigError{Stack: c.Stack, Errors: []FieldError{{Key: "storage.allowReplace", Value: "true", Msg: "already let the " +
				"last update through; remove it: it lets one update replace protected storage, and left set it would keep " +
				"the guard off for every update after"}}}
		}
		return nil
	}
	if !guarded(previous) {
		return nil
	}
	previous = olderIdentity(previous)
	current := StorageIdentity(c)
	keys := map[string]bool{}
	for k := range previous {
		keys[k] = true
	}
	for k := range current {
		keys[k] = true
	}
	var changed []string
	for k := range keys {
		if k != "storage.protect" && k != guardedKey && k != allowReplaceKey && previous[k] != current[k] {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	sort.Strings(changed)
	what := fmt.Sprintf("replaces the protected %s storage", previous["storage.type"])
	var errs []FieldError
	for _, k := range changed {
		errs = append(errs, FieldError{Key: k, Value: shown(current[k]), Msg: fmt.Sprintf(
			"was %s; this change %s (its claim, volume or file store) and would delete its data. "+
				"Revert it; to move to other storage, copy the data out first (docs/operating/day-two.md); "+
				"kolotoc:storage.allowReplace: true with kolotoc:storage.protect: false lets one update through",
			shown(previous[k]), what)})
	}
	return &ConfigError{Stack: c.Stack, Errors: errs}
}

func shown(v string) string {
	if v == "" {
		return "(unset)"
	}
	return v
}

// previousStorageIdentity reads the identity the stack's last update recorded.
func previousStorageIdentity(ctx *pulumi.Context) (map[string]string, error) {
	var res struct {
		Outputs struct {
			StorageIdentity map[string]string `pulumi:"storageIdentity"`
		} `pulumi:"outputs"`
	}
	self := strings.Join([]string{ctx.Organization(), ctx.Project(), ctx.Stack()}, "/")
	// InvokePackageRaw rather than Invoke: the outputs hold secrets (a cloud's kubeconfig), which
	// Invoke refuses; only the non-secret storageIdentity is decoded.
	var err error
	for attempt, wait := 1, readOutputsFirstRetry; ; attempt, wait = attempt+1, 2*wait {
		if _, err = ctx.InvokePackageRaw(readStackOutputs, map[string]any{"name": self}, &res, ""); err == nil {
			return res.Outputs.StorageIdentity, nil
		}
		if attempt == readOutputsAttempts {
			return nil, fmt.Errorf("after %d attempts: %w", attempt, err)
		}
		time.Sleep(wait)
	}
}

// The stack's last outputs are read while the engine is already saving the checkpoint of the
// update that just began (the program's root resource is registered before the program runs).
// The file backend can then read a checkpoint that is being rewritten ("failed to load
// checkpoint: EOF"), so a failed read is tried again: 5 attempts, 0.1 s apart at first, doubling
// (3.1 s in all).
const (
	readOutputsAttempts   = 5
	readOutputsFirstRetry = 100 * time.Millisecond
)

// guardStorage runs CheckStorageReplacement against the stack's last update, before anything is
// registered, and exports the identity of the storage this update deploys.
func guardStorage(ctx *pulumi.Context, c *Config) error {
	previous, err := previousStorageIdentity(ctx)
	if err != nil {
		if c.Storage.AllowReplace {
			previous = nil
		} else {
			return fmt.Errorf("%s:storage: cannot read the stack's last outputs to check that this update keeps its protected storage "+
				"(%v); set %s:storage.allowReplace: true to deploy without the check", ConfigNamespace, err, ConfigNamespace)
		}
	}
	if err := CheckStorageReplacement(c, previous); err != nil {
		return err
	}
	ctx.Export(StorageIdentityOutput, pulumi.ToStringMap(RecordedIdentity(c, previous)))
	return nil
}
