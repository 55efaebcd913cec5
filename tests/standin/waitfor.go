package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// condExpr is one "condition=<Type>[=<Status>]" expression (status True when not given), the
// syntax of `kubectl wait --for=condition=`.
type condExpr struct{ typ, status string }

// parseWaitFor reads the annotation. The real provider also takes "jsonpath=" expressions; the
// stand-in does not implement them and says so rather than skipping the wait.
func parseWaitFor(val string) ([]condExpr, error) {
	var exprs []string
	if err := json.Unmarshal([]byte(val), &exprs); err != nil {
		exprs = []string{val}
	}
	if len(exprs) == 0 {
		return nil, fmt.Errorf("at least one condition must be specified")
	}
	var out []condExpr
	for _, e := range exprs {
		switch {
		case strings.HasPrefix(e, "condition="):
			typ, status, ok := strings.Cut(strings.TrimPrefix(e, "condition="), "=")
			if !ok {
				status = "True"
			}
			out = append(out, condExpr{typ: typ, status: status})
		case strings.HasPrefix(e, "jsonpath="):
			return nil, fmt.Errorf("%s %q: jsonpath expressions are not implemented by the test bed's stand-in provider (condition= expressions are)", annotationWaitFor, e)
		default:
			return nil, fmt.Errorf(`expected a "jsonpath=" or "condition=" prefix, got %q`, e)
		}
	}
	return out, nil
}

// waitForAwaiter is the awaiter of an object carrying pulumi.com/waitFor (nil without it).
func waitForAwaiter(obj *unstructured.Unstructured) (*awaiter, error) {
	val := obj.GetAnnotations()[annotationWaitFor]
	if val == "" {
		return nil, nil
	}
	conds, err := parseWaitFor(val)
	if err != nil {
		return nil, err
	}
	return &awaiter{timeout: defaultAwaitTimeout, eval: func(ctx context.Context, w *waiter) (evaluation, error) {
		live, err := w.get(ctx)
		if err != nil {
			return evaluation{}, err
		}
		return evaluation{readiness: ConditionsReadiness(live, conds), live: live}, nil
	}}, nil
}

// ConditionsReadiness: every condition holds, each at the object's current generation when the
// object reports the generation it observed (kubectl's checkCondition, which the real provider
// uses).
func ConditionsReadiness(obj *unstructured.Unstructured, conds []condExpr) Readiness {
	var waiting []string
	for _, c := range conds {
		if msg := conditionUnmet(obj, c); msg != "" {
			waiting = append(waiting, msg)
		}
	}
	if len(waiting) == 0 {
		return Readiness{Ready: true, Status: fmt.Sprintf("%s %q has its conditions", obj.GetKind(), obj.GetName())}
	}
	return Readiness{Status: strings.Join(waiting, "; "), Errors: waiting}
}

// conditionUnmet says why a condition does not hold ("" when it does).
func conditionUnmet(obj *unstructured.Unstructured, c condExpr) string {
	conds, found, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if !found {
		return fmt.Sprintf("waiting for condition %s=%s: %s %q has no .status.conditions", c.typ, c.status, obj.GetKind(), obj.GetName())
	}
	for _, raw := range conds {
		cond, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		typ, _, _ := unstructured.NestedString(cond, "type")
		if !strings.EqualFold(typ, c.typ) {
			continue
		}
		status, found, _ := unstructured.NestedString(cond, "status")
		if !found {
			continue
		}
		if gen := obj.GetGeneration(); gen > 0 {
			observed, ok, _ := unstructured.NestedInt64(cond, "observedGeneration")
			if !ok {
				observed, ok, _ = unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
			}
			if ok && observed < gen {
				return fmt.Sprintf("waiting for condition %s=%s: generation %d is less than expected %d", c.typ, c.status, observed, gen)
			}
		}
		if !strings.EqualFold(status, c.status) {
			msg, _, _ := unstructured.NestedString(cond, "message")
			return fmt.Sprintf("waiting for condition %s=%s: it is %s (%s)", c.typ, c.status, status, msg)
		}
		return ""
	}
	return fmt.Sprintf("waiting for condition %s=%s: not reported yet", c.typ, c.status)
}
