package httpx

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Causes of a KeyContext that ended because of its key.
var (
	ErrKeyRevoked = errors.New("the API key this stream was opened with was revoked")
	ErrKeyExpired = errors.New("the API key this stream was opened with has expired")
)

// KeyContext is r's context, ended (with cause ErrKeyRevoked or
// ErrKeyExpired) as soon as the key the request authenticated with is
// revoked, on any replica, or expires: a stream opened with a key lasts no
// longer than the key. It costs nothing per event: the revocation calls
// it back, and the expiry is a timer. Call cancel when the stream ends.
func KeyContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(r.Context())
	k := RequestKey(r)
	var stopTimer func() bool
	if k.ExpiresAt != nil {
		stopTimer = time.AfterFunc(time.Until(*k.ExpiresAt), func() { cancel(ErrKeyExpired) }).Stop
	}
	stopWatch := func() {}
	if k.Watch != nil {
		stopWatch = k.Watch(ctx, k.Hash, func() { cancel(ErrKeyRevoked) })
	}
	return ctx, func() {
		stopWatch()
		if stopTimer != nil {
			stopTimer()
		}
		cancel(context.Canceled)
	}
}

// KeyEnded is the reason ctx (a KeyContext) ended because of its key, nil
// when it did not.
func KeyEnded(ctx context.Context) error {
	switch c := context.Cause(ctx); {
	case errors.Is(c, ErrKeyRevoked), errors.Is(c, ErrKeyExpired):
		return c
	}
	return nil
}
