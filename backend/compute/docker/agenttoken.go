package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
)

// The agent's access token never goes where `docker ps` or `docker inspect`
// show it (labels, environment, command line): anyone allowed to list
// containers could otherwise drive every sandbox's agent. It is a file,
// copied into the created container before it starts (mode 0400, owned
// by the user the agent runs as), and the agent is told only the file's
// path. The engine keeps it with the container, so any replica, a
// restarted backend and the reconciler read it back through the engine's
// archive API (once per container and process: agentTokens caches it).
const (
	// agentSecretDir holds the token file: in the container's writable
	// layer, or in an anonymous volume where the root filesystem is
	// read-only (a compose service's read_only), since the engine refuses
	// to copy into a read-only root.
	agentSecretDir  = "/.dreadnode-secret"
	agentTokenPath  = agentSecretDir + "/token"
	agentTokenBytes = 24
	// labelAgent marks a container whose agent reads its token from
	// agentTokenPath (the label holds no secret).
	labelAgent     = "dev.dreadnode.agent"
	agentTokenFile = "token-file"
	// labelAgentToken is where backends before this one put the token;
	// read only so that their containers stay reachable.
	labelAgentToken = "dev.dreadnode.agent-token"
)

// agentTokenPattern is what a token read back must look like: the file is
// in the sandbox's reach, so what it holds is checked, not trusted.
var agentTokenPattern = regexp.MustCompile(`^[0-9a-f]{48}$`)

// hasAgent reports whether a container was made with the agent.
func hasAgent(c container.InspectResponse) bool {
	return c.Config != nil && (c.Config.Labels[labelAgent] != "" || c.Config.Labels[labelAgentToken] != "")
}

// agentTokenMount is the anonymous volume holding the token file of a
// container whose root filesystem is read-only (removed with it).
func agentTokenMount() mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Target: agentSecretDir}
}

// writeAgentToken copies the token file into the created (not yet
// started) container id, owned by the container's user (CopyUIDGID: the
// agent's own, root unless it runs as the service's user).
func writeAgentToken(ctx context.Context, cli *client.Client, id, token string, inVolume bool) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dest, name := "/", path.Base(agentSecretDir)+"/"
	if inVolume {
		dest, name = agentSecretDir, ""
	} else if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o700, ModTime: now}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name + path.Base(agentTokenPath), Mode: 0o400,
		Size: int64(len(token)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(token)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := cli.CopyToContainer(ctx, id, dest, &buf, container.CopyToContainerOptions{CopyUIDGID: true}); err != nil {
		return fmt.Errorf("giving the sandbox agent its token: %w", err)
	}
	return nil
}

// readAgentToken reads the token file back from container id. At most a
// few bytes are read, and anything but a regular file holding a token is
// refused: the sandbox may have replaced it.
func readAgentToken(ctx context.Context, cli *client.Client, id string) (string, error) {
	rc, _, err := cli.CopyFromContainer(ctx, id, agentTokenPath)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tar.NewReader(io.LimitReader(rc, 4096))
	h, err := tr.Next()
	if err != nil || h.Typeflag != tar.TypeReg || h.Size > 512 {
		return "", errReplacedToken
	}
	b, err := io.ReadAll(tr)
	if err != nil || !agentTokenPattern.Match(b) {
		return "", errReplacedToken
	}
	return string(b), nil
}

var errReplacedToken = errors.New("the sandbox agent's token file is not the one the backend wrote (was it replaced from inside?)")

// agentTokens caches each container's token (fixed for its life): a
// container made here is known at once, one made elsewhere is read from
// the engine once. Bounded: past envdCacheMax entries it starts over.
type agentTokens struct {
	mu sync.Mutex
	m  map[string]string
}

func (t *agentTokens) put(id, token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= envdCacheMax {
		t.m = map[string]string{}
	}
	t.m[id] = token
}

// token is c's agent token ("" for a container without the agent).
func (t *agentTokens) token(ctx context.Context, cli *client.Client, c container.InspectResponse) (string, error) {
	if !hasAgent(c) {
		return "", nil
	}
	if legacy := c.Config.Labels[labelAgentToken]; legacy != "" {
		return legacy, nil
	}
	t.mu.Lock()
	tok, ok := t.m[c.ID]
	t.mu.Unlock()
	if ok {
		return tok, nil
	}
	tok, err := readAgentToken(ctx, cli, c.ID)
	if err != nil {
		return "", err
	}
	t.put(c.ID, tok)
	return tok, nil
}

// agentTokenEnv tells the agent where its token is.
func agentTokenEnv() string { return agent.EnvTokenFile + "=" + agentTokenPath }
