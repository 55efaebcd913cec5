package elastic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"kolotoc/components/meta"
)

// RdzvConf is kolotoc:elastic.rdzvConf, torchrun's --rdzv_conf: rendezvous options as a map
// (`last_call_timeout: 5`) or a list of `key=value` strings (`["last_call_timeout=5"]`, as the
// torchelastic guide writes it). The wrapper joins them to its own is_host (c10d), so they never
// replace it. A value of any other shape is kept as a problem for Validate, which reports it under
// its key; decoding never fails on it.
type RdzvConf struct {
	Values   map[string]string // option → value, as torchrun receives them
	problems [][2]string       // (value, what is wrong) found while decoding
}

// UnmarshalJSON takes a map of strings, numbers or booleans, or a list of key=value strings.
func (r *RdzvConf) UnmarshalJSON(b []byte) error {
	r.Values, r.problems = map[string]string{}, nil
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		r.Values = nil
		return nil
	}
	var asMap map[string]json.RawMessage
	if err := json.Unmarshal(b, &asMap); err == nil {
		for k, v := range asMap {
			s, ok := scalar(v)
			if !ok {
				r.problems = append(r.problems, [2]string{k + ": " + string(v), "a value must be a string, a number or true/false"})
				continue
			}
			r.Values[k] = s
		}
		return nil
	}
	var asList []json.RawMessage
	if err := json.Unmarshal(b, &asList); err == nil {
		for _, v := range asList {
			var s string
			if json.Unmarshal(v, &s) != nil || !strings.Contains(s, "=") {
				r.problems = append(r.problems, [2]string{string(v), "a list item must be a string key=value"})
				continue
			}
			k, val, _ := strings.Cut(s, "=")
			r.Values[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
		return nil
	}
	r.problems = append(r.problems, [2]string{string(b), "want a map of options or a list of key=value strings"})
	return nil
}

// MarshalJSON writes the options as a map.
func (r RdzvConf) MarshalJSON() ([]byte, error) { return json.Marshal(r.Values) }

func scalar(v json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String(), true
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return strconv.FormatBool(b), true
	}
	return "", false
}

// rdzvOption is what one --rdzv_conf option takes.
type rdzvOption struct {
	kind    string   // seconds | bool | one of | path
	allowed []string // for one of
}

// The options torch reads from --rdzv_conf, per backend. Unknown options torch ignores without a
// word, so a misspelt one would silently keep its default: they are refused. Read from torch's
// torch/distributed/elastic/rendezvous: dynamic_rendezvous.py create_handler (join_timeout,
// last_call_timeout, close_timeout; c10d and etcd-v2), c10d_rendezvous_backend.py (read_timeout,
// store_type, use_libuv since torch 2.4), etcd_rendezvous_backend.py (read_timeout, protocol,
// ssl_cert, ssl_cert_key, ca_cert) and etcd_rendezvous.py (etcd: timeout, last_call_timeout,
// etcd_prefix, protocol, cert, key, cacert). is_host is the wrapper's (launchScript).
var dynamicOptions = map[string]rdzvOption{
	"join_timeout": {kind: "seconds"}, "last_call_timeout": {kind: "seconds"}, "close_timeout": {kind: "seconds"},
	"read_timeout": {kind: "seconds"},
}

var rdzvOptions = map[string]map[string]rdzvOption{
	BackendC10d: merged(dynamicOptions, map[string]rdzvOption{
		"store_type": {kind: "one of", allowed: []string{"tcp", "file"}},
		"use_libuv":  {kind: "bool"},
	}),
	BackendEtcdV2: merged(dynamicOptions, map[string]rdzvOption{
		"protocol": {kind: "one of", allowed: []string{"http", "https"}},
		"ssl_cert": {kind: "path"}, "ssl_cert_key": {kind: "path"}, "ca_cert": {kind: "path"},
	}),
	BackendEtcd: {
		"timeout": {kind: "seconds"}, "last_call_timeout": {kind: "seconds"},
		"etcd_prefix": {kind: "path"},
		"protocol":    {kind: "one of", allowed: []string{"http", "https"}},
		"cert":        {kind: "path"}, "key": {kind: "path"}, "cacert": {kind: "path"},
	},
}

func merged(a, b map[string]rdzvOption) map[string]rdzvOption {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// isHostOption is the option the c10d wrapper sets itself on every worker.
const isHostOption = "is_host"

// validateRdzvConf reports every problem of elastic.rdzvConf under elastic.rdzvConf.<option>.
func (el Config) validateRdzvConf(p meta.Problems) {
	key := Key + ".rdzvConf"
	for _, pr := range el.RdzvConf.problems {
		p.Add(key, pr[0], pr[1])
	}
	known, ok := rdzvOptions[el.RdzvBackend]
	if !ok {
		return // the backend's own problem is reported
	}
	for _, k := range slices.Sorted(maps.Keys(el.RdzvConf.Values)) {
		v := el.RdzvConf.Values[k]
		if k == isHostOption {
			p.Add(key+"."+k, v, "set by Kolotoc on every worker (true on worker 0, which hosts the c10d store); leave it out")
			continue
		}
		o, ok := known[k]
		if !ok {
			p.Add(key+"."+meta.OrUnset(k), v, fmt.Sprintf("not an option of the %s rendezvous; allowed: %s", el.RdzvBackend,
				strings.Join(slices.Sorted(maps.Keys(known)), ", ")))
			continue
		}
		// torchrun splits --rdzv_conf on ',' and each option on its first '='.
		if v == "" || strings.ContainsAny(v, ", \t\n\"'\\$`") {
			p.Add(key+"."+k, meta.OrUnset(v), "a value must be non-empty, without ',', quotes, '$', '\\' or spaces (torchrun splits --rdzv_conf on ',')")
			continue
		}
		switch o.kind {
		case "seconds":
			if n, err := strconv.Atoi(v); err != nil || n < 1 {
				p.Add(key+"."+k, v, "a whole number of seconds, at least 1")
			}
		case "bool":
			if !slices.Contains([]string{"true", "false", "1", "0"}, strings.ToLower(v)) {
				p.Add(key+"."+k, v, "allowed: true, false")
			}
		case "one of":
			if !slices.Contains(o.allowed, v) {
				p.Add(key+"."+k, v, "allowed: "+strings.Join(o.allowed, ", "))
			}
		}
	}
}

// RdzvConfString is the user's options as torchrun's --rdzv_conf takes them, sorted by option:
// key=value,key=value; empty without any.
func RdzvConfString(c RdzvConf) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.Values)) {
		parts = append(parts, k+"="+c.Values[k])
	}
	return strings.Join(parts, ",")
}
