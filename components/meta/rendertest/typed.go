package rendertest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Decode converts a registration's inputs (Inputs) into a typed object, e.g. a
// k8s.io/api/apps/v1.StatefulSet, so that a test reads `ss.Spec.Template.Spec.Containers[0]`
// instead of walking maps. Fields the type does not know fail the test: a typo in the program's
// args (or a type that does not match the registration) cannot pass unseen. Secrets arrive as
// SecretMarker and unknowns as "[unknown]", so a field holding one must be a string in T.
func Decode[T any](t *testing.T, r Resource) T {
	t.Helper()
	return DecodeValue[T](t, r.Name, Inputs(r))
}

// DecodeValue converts a plain value (Plain, Get) into T; what names it in a failure.
func DecodeValue[T any](t *testing.T, what string, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("%s: decoding into %T: %v\n%s", what, out, err, b)
	}
	return out
}

// DecodeSome converts a registration's inputs into T reading only the fields T declares: for a
// local struct that names the few fields a test asserts (a cloud resource has no Go type of its
// own but the SDK's args, which hold Outputs).
func DecodeSome[T any](t *testing.T, r Resource) T {
	t.Helper()
	var out T
	b, err := json.Marshal(Inputs(r))
	if err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: decoding into %T: %v\n%s", r.Name, out, err, b)
	}
	return out
}

// Value waits for an output's value. An ApplyT inside the program is not enough for an output made
// from plain values (ToStringArrayOutput and the like): it belongs to no resource, so the program's
// end does not wait for its apply, and the test may read the variable before the apply ran. The
// wait is bounded so that an output that never resolves fails the test instead of hanging it.
func Value[T any](t *testing.T, o pulumi.Output) T {
	t.Helper()
	ch := make(chan T, 1)
	o.ApplyT(func(v T) (T, error) { ch <- v; return v, nil })
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		var zero T
		t.Fatalf("output %T never resolved", o)
		return zero
	}
}
