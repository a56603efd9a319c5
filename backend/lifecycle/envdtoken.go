package lifecycle

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// envdTokenPrefix marks a derived envd token.
const envdTokenPrefix = "sbx_envd_"

// EnvdToken is the envd access token of a sandbox created through the E2B
// edge with secure: true (store.Spec.E2BSecure), "" for any other. As
// E2B's, it is derived, not drawn: HMAC-SHA256 of the sandbox id keyed by
// the database's seed (store.EnvdTokenSeed), so create, GET, connect and
// resume all answer the same token, every replica derives it alike, and
// nothing is stored. Connect rotates the sandbox's access token, never
// this one.
func (s *Service) EnvdToken(ctx context.Context, rec *store.Record) (string, error) {
	if sec := rec.Spec.E2BSecure; sec == nil || !*sec {
		return "", nil
	}
	key, err := s.envdKey(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(rec.ID))
	return envdTokenPrefix + hex.EncodeToString(m.Sum(nil)), nil
}

// trafficTokenPrefix marks a derived traffic token: ids.Token's form (a
// prefix, "_", 48 hex digits), so the router strips it by form.
const trafficTokenPrefix = "sbx_at"

// TrafficToken is the trafficAccessToken of a sandbox created through the
// E2B edge ("" for any other): derived as EnvdToken is (HMAC-SHA256 of the
// id keyed by the database's seed, with a label of its own), so create,
// connect and resume answer the same token, as E2B's API does, and a
// second client connecting does not lock the first out. E2B's tests use
// the token create answered after pauses and resumes and never one from
// connect. The router takes it beside the record's access token
// (checkE2BTraffic); the native connect still rotates that one.
func (s *Service) TrafficToken(ctx context.Context, rec *store.Record) (string, error) {
	if rec.Spec.E2BSecure == nil {
		return "", nil
	}
	key, err := s.envdKey(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("traffic\x00" + rec.ID))
	return trafficTokenPrefix + "_" + hex.EncodeToString(m.Sum(nil)[:24]), nil
}

// envdKey is the seed, read from the database once (a failure is retried
// on the next call).
func (s *Service) envdKey(ctx context.Context) ([]byte, error) {
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	if s.envdSeed != nil {
		return s.envdSeed, nil
	}
	seed, err := s.db.EnvdTokenSeed(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the envd token seed: %w", err)
	}
	s.envdSeed = []byte(seed)
	return s.envdSeed, nil
}

// envdOpen: the sandbox was created through the E2B edge without secure,
// so its envd, as E2B's without a token, takes any request.
func envdOpen(rec *store.Record) bool {
	return rec.Spec.E2BSecure != nil && !*rec.Spec.E2BSecure
}

// envdInternal are envd.yaml's x-internal routes (and /upgrade, which
// envd registers outside its spec): the orchestrator's, which here is the
// backend. Through the router they answer E2B's proxy's 404, whatever the
// token: /init sets the agent's token and environment; /freeze,
// /unfreeze, /fsfreeze, /fsthaw and /collapse stop or thaw the sandbox's
// processes and filesystem; a pause is the state machine's decision.
var envdInternal = map[string]bool{"/init": true, "/freeze": true, "/unfreeze": true, "/fsfreeze": true, "/fsthaw": true,
	"/collapse": true, "/upgrade": true}
