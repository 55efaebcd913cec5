// Package problemtest records what a config section's Validate reports, for the sections' table
// tests.
package problemtest

import "kolotoc/components/meta"

// Recorder is a meta.Problems that keeps each problem as "key=value: msg", in report order.
type Recorder []string

// Add records one problem.
func (r *Recorder) Add(key, value, msg string) { *r = append(*r, key+"="+value+": "+msg) }

// Report is what validate reports, in its order.
func Report(validate func(meta.Problems)) []string {
	var r Recorder
	validate(&r)
	return r
}
