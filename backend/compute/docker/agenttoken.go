package docker

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
)

// The agent's access token never goes where `docker ps` or `docker inspect`
// show it (labels, environment, command line): anyone allowed to list
// containers could otherwise drive every sandbox's agent. As envd tokens
// are (store.EnvdTokenSeed), it is derived, never stored: HMAC-SHA256 of
// the deployment's seed (its database's, Config.AgentTokenSeed) over a
// random nonce in the container's label. Every backend of the deployment
// (a replica, a restarted one, the reconciler) derives it again from the
// label; only its SHA-256 is in the agent's environment, which is what the
// agent checks against, and which does not give the token back.
const (
	// labelAgent holds the nonce a container's token is derived from
	// (no secret without the seed).
	labelAgent = "dev.dreadnode.agent"
	// labelAgentToken is where backends before this one put the token
	// itself; read only so that their containers stay reachable.
	labelAgentToken = "dev.dreadnode.agent-token"
)

// tokenKey derives agent tokens.
type tokenKey []byte

// newTokenKey is the key of seed; without one (a provider used alone, in
// tests) a random key of this process, whose sandboxes no other process
// can then reach.
func newTokenKey(seed string) tokenKey {
	if seed != "" {
		return tokenKey(seed)
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// token is the token of nonce: 48 hex digits.
func (k tokenKey) token(nonce string) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte("dn-agent-token\x00" + nonce))
	return hex.EncodeToString(m.Sum(nil))[:48]
}

// inject gives cfg a fresh nonce and tells its agent the token's hash.
func (k tokenKey) inject(cfg *container.Config) {
	nonce := randomHex(16)
	cfg.Labels[labelAgent] = nonce
	sum := sha256.Sum256([]byte(k.token(nonce)))
	cfg.Env = append(cfg.Env, agent.EnvTokenSHA256+"="+hex.EncodeToString(sum[:]))
}

// tokenOf is c's agent token ("" for a container made without the agent).
func (k tokenKey) tokenOf(c container.InspectResponse) string {
	if c.Config == nil {
		return ""
	}
	if legacy := c.Config.Labels[labelAgentToken]; legacy != "" {
		return legacy
	}
	if nonce := c.Config.Labels[labelAgent]; nonce != "" {
		return k.token(nonce)
	}
	return ""
}

// hasAgent reports whether a container was made with the agent.
func hasAgent(c container.InspectResponse) bool {
	return c.Config != nil && (c.Config.Labels[labelAgent] != "" || c.Config.Labels[labelAgentToken] != "")
}
