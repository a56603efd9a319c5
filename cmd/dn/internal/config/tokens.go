package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Kinds of kept secrets.
const (
	// KindEnvironment: a task environment's execute token.
	KindEnvironment = "environments"
	// KindSandbox: a sandbox's access token (create, connect, runtime start).
	KindSandbox = "sandboxes"
)

// ErrNoToken means no token is kept for that id on this machine.
var ErrNoToken = errors.New("no token kept")

// Tokens keeps the secrets the API shows once, one file per id under
// <dir>/tokens/<kind>/ with mode 0600.
type Tokens struct{ Dir string }

var safeID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,200}$`)

// Path is where the token of kind and id is kept.
func (t Tokens) Path(kind, id string) (string, error) {
	if !safeID.MatchString(id) || id == "." || id == ".." {
		return "", fmt.Errorf("%q is not an id (letters, digits, '.', '_', '-')", id)
	}
	return filepath.Join(t.Dir, "tokens", kind, id), nil
}

// Put keeps token for id.
func (t Tokens) Put(kind, id, token string) (string, error) {
	p, err := t.Path(kind, id)
	if err != nil {
		return "", err
	}
	_ = os.MkdirAll(filepath.Join(t.Dir, "tokens"), 0o700)
	return p, writeSecret(t.Dir, p, []byte(token+"\n"))
}

// Get returns the token kept for id, or ErrNoToken.
func (t Tokens) Get(kind, id string) (string, error) {
	p, err := t.Path(kind, id)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNoToken
	}
	if err != nil {
		return "", fmt.Errorf("reading the kept token %s: %w", p, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", ErrNoToken
	}
	return tok, nil
}

// Delete forgets the token of id (no error when none is kept).
func (t Tokens) Delete(kind, id string) error {
	p, err := t.Path(kind, id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
