package config

import "testing"

// dn's environment is read through one typed struct, and Getenv answers
// each variable Resolve and Dir ask for from it.
func TestReadEnv(t *testing.T) {
	want := map[string]string{EnvAPIURL: "http://u", EnvAPIKey: "k", EnvOrg: "o", EnvWorkspace: "w", EnvProfile: "p",
		"XDG_CONFIG_HOME": "/x", "HOME": "/h"}
	for k, v := range want {
		t.Setenv(k, v)
	}
	e, err := ReadEnv()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got := e.Getenv(k); got != v {
			t.Errorf("Getenv(%s) = %q, want %q", k, got, v)
		}
	}
	if got := e.Getenv("PATH"); got != "" {
		t.Errorf("Getenv(PATH) = %q: dn does not read it", got)
	}
}
