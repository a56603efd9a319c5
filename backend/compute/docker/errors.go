package docker

import (
	"context"
	"errors"
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// classify turns a Docker SDK error into a *compute.Error. The daemon's own
// sentence is kept as the message: it is usually the most precise one.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *compute.Error
	if errors.As(err, &pe) {
		return err
	}
	msg := daemonMessage(err)
	kind := compute.KindInternal
	switch {
	case client.IsErrConnectionFailed(err):
		kind, msg = compute.KindUnavailable, "the Docker daemon is not reachable (is it running? check DOCKER_HOST): "+msg
	case errors.Is(err, context.DeadlineExceeded):
		kind = compute.KindTimeout
	case errors.Is(err, context.Canceled):
		kind = compute.KindUnavailable
	case cerrdefs.IsNotFound(err):
		kind = compute.KindNotFound
	case cerrdefs.IsConflict(err), isStateConflict(msg):
		kind = compute.KindConflict
	case cerrdefs.IsInvalidArgument(err):
		kind = compute.KindInvalid
	case cerrdefs.IsUnavailable(err):
		kind = compute.KindUnavailable
	case cerrdefs.IsUnauthorized(err), cerrdefs.IsPermissionDenied(err):
		kind = compute.KindAuth
	}
	return &compute.Error{Kind: kind, Op: op, Msg: msg, Err: err}
}

// isStateConflict recognises "wrong state" answers that some daemon versions
// send as 500 instead of 409.
func isStateConflict(msg string) bool {
	for _, s := range []string{"is already paused", "is not paused", "is not running", "is paused"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// daemonMessage strips the SDK's "Error response from daemon: " prefix and
// the engine host's paths: the daemon names a file in a container by its
// path on the host ("lstat /var/lib/docker/overlay2/<id>/merged/etc/x"),
// which says nothing to the user and too much to an attacker.
func daemonMessage(err error) string {
	return hostPath.ReplaceAllString(strings.TrimPrefix(err.Error(), "Error response from daemon: "), "")
}

// hostPath is the host's part of a path into a container's filesystem: up
// to the 64-hex layer or container id (every storage driver has one) and
// the driver's subdirectory after it.
var hostPath = regexp.MustCompile(`/[^\s:"']*/[0-9a-f]{64}(?:-init)?(?:/(?:merged|diff|rootfs))?`)

// isNoSuchContainer tells a missing container from a missing file: both are
// 404 answers of the archive endpoints.
func isNoSuchContainer(err error) bool {
	return cerrdefs.IsNotFound(err) && strings.Contains(err.Error(), "No such container")
}

// containsAny reports whether s contains one of subs, case-insensitively.
func containsAny(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, sub := range subs {
		if strings.Contains(s, strings.ToLower(sub)) {
			return true
		}
	}
	return false
}
