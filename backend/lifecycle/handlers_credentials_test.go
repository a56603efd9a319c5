package lifecycle

import (
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
)

// Every secret the backend mints has the form the router drops unseen;
// an application's own credentials do not.
func TestSecretShaped(t *testing.T) {
	for _, prefix := range []string{"dn_key", "dn_dev", "sbx_at", "det", "bench"} {
		if s := ids.Token(prefix); !secretShaped(s) {
			t.Errorf("%s is minted by the backend but not recognised", s)
		}
	}
	for _, s := range []string{"", "dXNlcjpwYXNz", "eyJhbGciOiJIUzI1NiJ9.e30.sig", "_" + strings.Repeat("a", 48),
		"dn_key_" + strings.Repeat("A", 48), "dn_key_" + strings.Repeat("a", 47), "dn key_" + strings.Repeat("a", 48)} {
		if secretShaped(s) {
			t.Errorf("%q is not a secret of ours but would be dropped", s)
		}
	}
}
