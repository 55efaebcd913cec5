package registry

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConfigJSON: each registry's entry carries its user, password and the basic auth the kubelet
// sends; Docker Hub goes under the key the kubelet looks images without a host up by; the text
// does not depend on the order of the registries (quiet previews).
func TestConfigJSON(t *testing.T) {
	auths := []Auth{{Server: "ghcr.io", Username: "bot", Password: "token-1"}, {Server: "docker.io", Username: "me", Password: "token-2"}}
	got := configJSON(auths)
	if again := configJSON([]Auth{auths[1], auths[0]}); again != got {
		t.Errorf("the config depends on the registries' order:\n%s\n%s", got, again)
	}
	var cfg struct {
		Auths map[string]map[string]string `json:"auths"`
	}
	if err := json.Unmarshal([]byte(got), &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"ghcr.io":                     {"username": "bot", "password": "token-1", "auth": base64.StdEncoding.EncodeToString([]byte("bot:token-1"))},
		"https://index.docker.io/v1/": {"username": "me", "password": "token-2", "auth": base64.StdEncoding.EncodeToString([]byte("me:token-2"))},
	}
	if d := cmp.Diff(want, cfg.Auths); d != "" {
		t.Errorf("auths (-want +got):\n%s", d)
	}
}
