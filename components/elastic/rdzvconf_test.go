package elastic

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kolotoc/components/meta/rendertest"
)

// TestRdzvConf: elastic.rdzvConf is read as a map (numbers and booleans as torchrun receives
// them) or as the torchelastic guide's key=value list; each problem is reported under
// elastic.rdzvConf.<option> with what the backend allows; is_host, the wrapper's own, is refused.
// The options are those torch reads (rdzvconf.go names the files).
func TestRdzvConf(t *testing.T) {
	base := NewConfig()
	base.Pool, base.GPUsPerNode, base.RdzvID = "gpu", 8, "kolotoc-dev"
	base.Default()
	for _, tc := range []struct {
		name, backend, json string
		wantConf            string
		want                []string
	}{
		{"map", BackendC10d, `{"last_call_timeout":5,"join_timeout":"900","use_libuv":false}`, "join_timeout=900,last_call_timeout=5,use_libuv=false", nil},
		{"list, as the torchelastic guide", BackendEtcdV2, `["last_call_timeout=5", "protocol=https"]`, "last_call_timeout=5,protocol=https", nil},
		{"legacy etcd", BackendEtcd, `{"timeout":600,"etcd_prefix":"/torchelastic/p2p"}`, "etcd_prefix=/torchelastic/p2p,timeout=600", nil},
		{"none", BackendC10d, `null`, "", nil},
		{"is_host is the wrapper's", BackendC10d, `{"is_host":true}`, "is_host=true",
			[]string{"elastic.rdzvConf.is_host=true: set by Kolotoc on every worker (true on worker 0, which hosts the c10d store); leave it out"}},
		{"misspelt option", BackendC10d, `{"last_call_timout":5}`, "last_call_timout=5",
			[]string{"elastic.rdzvConf.last_call_timout=5: not an option of the c10d rendezvous; allowed: close_timeout, join_timeout, last_call_timeout, read_timeout, store_type, use_libuv"}},
		{"an etcd option on c10d", BackendC10d, `{"protocol":"https"}`, "protocol=https",
			[]string{"elastic.rdzvConf.protocol=https: not an option of the c10d rendezvous; allowed: close_timeout, join_timeout, last_call_timeout, read_timeout, store_type, use_libuv"}},
		{"not seconds", BackendC10d, `{"join_timeout":"10m"}`, "join_timeout=10m", []string{"elastic.rdzvConf.join_timeout=10m: a whole number of seconds, at least 1"}},
		{"zero seconds", BackendC10d, `{"join_timeout":0}`, "join_timeout=0", []string{"elastic.rdzvConf.join_timeout=0: a whole number of seconds, at least 1"}},
		{"a comma would split it", BackendEtcdV2, `{"ca_cert":"/a,b"}`, "ca_cert=/a,b",
			[]string{"elastic.rdzvConf.ca_cert=/a,b: a value must be non-empty, without ',', quotes, '$', '\\' or spaces (torchrun splits --rdzv_conf on ',')"}},
		{"one of", BackendC10d, `{"store_type":"redis"}`, "store_type=redis", []string{"elastic.rdzvConf.store_type=redis: allowed: tcp, file"}},
		{"list item not key=value", BackendC10d, `["last_call_timeout"]`, "", []string{`elastic.rdzvConf="last_call_timeout": a list item must be a string key=value`}},
		{"a nested value", BackendC10d, `{"join_timeout":{"s":5}}`, "", []string{`elastic.rdzvConf=join_timeout: {"s":5}: a value must be a string, a number or true/false`}},
		{"a string", BackendC10d, `"last_call_timeout=5"`, "", []string{`elastic.rdzvConf="last_call_timeout=5": want a map of options or a list of key=value strings`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.RdzvBackend = tc.backend
			if err := json.Unmarshal([]byte(`{"rdzvConf":`+tc.json+`}`), &c); err != nil {
				t.Fatal(err)
			}
			if got := RdzvConfString(c.RdzvConf); got != tc.wantConf {
				t.Errorf("--rdzv_conf %q, want %q", got, tc.wantConf)
			}
			var got problems
			c.Validate(&got)
			if !reflect.DeepEqual([]string(got), tc.want) {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRdzvConfReachesTorchrun runs the workers' wrapper with a torchrun that prints its
// arguments: the user's options join the wrapper's is_host in one --rdzv_conf (torchrun keeps
// only the last one it is given, torch/distributed/run.py), on worker 0 and on the others; with
// an etcd backend they are the --rdzv_conf; without any, the arguments are as before.
func TestRdzvConfReachesTorchrun(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "torchrun"), []byte("#!/bin/sh\nfor a; do echo \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// python3 -c 'import etcd' succeeds: no install.
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, backend, pod, conf string
		wantFirst                []string
	}{
		{"c10d worker 0", BackendC10d, "elastic-0", `{"last_call_timeout":5}`, []string{"--rdzv_conf=is_host=true,last_call_timeout=5"}},
		{"c10d worker 3", BackendC10d, "elastic-3", `{"last_call_timeout":5,"join_timeout":900}`, []string{"--rdzv_conf=is_host=false,join_timeout=900,last_call_timeout=5"}},
		{"c10d worker 10", BackendC10d, "elastic-10", `null`, []string{"--rdzv_conf=is_host=false"}},
		{"c10d queued extra worker 10", BackendC10d, "elastic-extra-10", `null`, []string{"--rdzv_conf=is_host=false"}},
		{"c10d, no options", BackendC10d, "elastic-0", `null`, []string{"--rdzv_conf=is_host=true"}},
		{"etcd-v2", BackendEtcdV2, "elastic-1", `["last_call_timeout=5"]`, []string{"--rdzv_conf=last_call_timeout=5"}},
		{"etcd-v2, no options", BackendEtcdV2, "elastic-1", `null`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testArgs(func(c *Config) {
				c.RdzvBackend = tc.backend
				if err := json.Unmarshal([]byte(tc.conf), &c.RdzvConf); err != nil {
					t.Fatal(err)
				}
			})
			sts := rendertest.Inputs(render(t, a).One(t, "kubernetes:apps/v1:StatefulSet", "elastic"))
			w := rendertest.Get(sts, "spec", "template", "spec", "containers", "[0]")
			env := []string{"PATH=" + bin + ":/usr/bin:/bin", "POD_NAME=" + tc.pod}
			envs, _ := rendertest.Get(w, "env").([]any)
			for _, e := range envs {
				m := e.(map[string]any)
				if v, ok := m["value"].(string); ok && strings.HasPrefix(m["name"].(string), "KOLOTOC_RDZV") {
					env = append(env, m["name"].(string)+"="+v)
				}
			}
			script := filepath.Join(t.TempDir(), "launch.sh")
			if err := os.WriteFile(script, []byte(launchScript), 0o755); err != nil {
				t.Fatal(err)
			}
			// The container's own arguments: torchrun's options (--rdzv_endpoint names the host).
			var args []string
			for _, x := range rendertest.Get(w, "args").([]any) {
				args = append(args, x.(string))
			}
			cmd := exec.Command("sh", append([]string{script}, args...)...)
			cmd.Env = env
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("wrapper: %v", err)
			}
			got := strings.Split(strings.TrimSpace(string(out)), "\n")
			want := append(append([]string{}, tc.wantFirst...), args...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("torchrun got %q, want %q", got, want)
			}
		})
	}
}
