package agent

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// maxEnvelopeBytes is the largest message a streamed request may carry:
// envd's messages are small (a process to start, a chunk of stdin, a
// path), and connect-go, left without a limit, would buffer whatever
// length an envelope's prefix promises.
const maxEnvelopeBytes = 16 << 20

// guardEnvelopes checks the envelopes of a streamed Connect or gRPC
// request (a 5-byte prefix: flags, then the message's length, big-endian)
// as its body is read. connect-go answers a body that ends before the
// length its prefix promised with `internal` ("protocol error: promised
// N bytes"), as if the agent had failed; the client sent a malformed
// request, so the answer is invalid_argument naming what was wrong. A
// length past maxEnvelopeBytes is refused the same way, before anything
// is buffered.
func guardEnvelopes(r *http.Request) {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	if r.Body == nil || r.Body == http.NoBody ||
		(!strings.HasPrefix(ct, "application/connect+") && !strings.HasPrefix(ct, "application/grpc")) {
		return
	}
	r.Body = &envelopeGuard{ReadCloser: r.Body}
}

type envelopeGuard struct {
	io.ReadCloser
	prefix  [5]byte
	have    int   // bytes of the current prefix read
	payload int64 // bytes of the current message still to come
	offset  int64 // bytes of the body read so far
	err     error // sticky: every read after a malformed envelope fails
}

func (g *envelopeGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.ReadCloser.Read(p)
	for b := p[:n]; len(b) > 0 && g.err == nil; {
		if g.payload > 0 {
			k := min(int64(len(b)), g.payload)
			g.payload -= k
			g.offset += k
			b = b[k:]
			continue
		}
		k := copy(g.prefix[g.have:], b)
		g.have += k
		g.offset += int64(k)
		b = b[k:]
		if g.have < len(g.prefix) {
			break
		}
		g.have = 0
		size := int64(binary.BigEndian.Uint32(g.prefix[1:]))
		if size > maxEnvelopeBytes {
			g.err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
				"the envelope at byte %d of the request promises a %d-byte message, over the %d-byte limit of a message", g.offset-5, size, maxEnvelopeBytes))
		}
		g.payload = size
	}
	if err == io.EOF && g.err == nil {
		switch {
		case g.have > 0:
			g.err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
				"the request body ended %d bytes into an envelope's 5-byte prefix (at byte %d): the envelope is truncated", g.have, g.offset))
		case g.payload > 0:
			g.err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
				"the request body ended %d bytes short of the message its last envelope promised (at byte %d): the envelope's length is wrong or the message truncated", g.payload, g.offset))
		}
	}
	if g.err != nil {
		return n, g.err
	}
	return n, err
}
