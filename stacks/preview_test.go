package stacks

import (
	"strings"
	"testing"
)

// A preview copy names its objects as the stack it copies, and is never deployed; the key is
// refused anywhere but on <stack>-preview.
func TestPreviewCopy(t *testing.T) {
	for _, tc := range []struct {
		name, stack, of string
		dryRun          bool
		want            string // the stack name the program uses, or the error's text
	}{
		{"preview of the copy", "prod-preview", "prod", true, "prod"},
		{"up of the copy", "prod-preview", "prod", false, "is never deployed"},
		{"the key on the stack itself", "prod", "prod", true, "is the stack prod-preview, not prod"},
		{"the key on another stack", "dev-preview", "prod", true, "is the stack prod-preview, not dev-preview"},
		{"not a name", "x-preview", "org/x", true, "not a stack name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := Raw{Stack: tc.stack, Values: map[string]string{previewOfKey: tc.of}}
			err := previewCopy(&raw, tc.dryRun)
			switch {
			case err == nil && raw.Stack != tc.want:
				t.Fatalf("stack %q, want %q", raw.Stack, tc.want)
			case err != nil && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			case err != nil && !strings.Contains(err.Error(), "previewOf"):
				t.Fatalf("error %q does not name the key", err)
			case err == nil && tc.want != tc.of:
				t.Fatalf("accepted; want an error saying %q", tc.want)
			}
		})
	}
	raw := Raw{Stack: "prod", Values: map[string]string{}}
	if err := previewCopy(&raw, false); err != nil || raw.Stack != "prod" {
		t.Fatalf("a stack without the key: %v, %q", err, raw.Stack)
	}
}
