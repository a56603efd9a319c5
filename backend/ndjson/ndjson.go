// Package ndjson streams newline-delimited JSON answers (API.md §6): one
// object per line, flushed as it is produced, and the process events of
// exec, process output and task-environment execute.
package ndjson

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// maxLineKept is the largest line buffer a Writer keeps between lines:
// six times a 32 KiB chunk of escapes, with room.
const maxLineKept = 256 << 10

// ContentType selects streamed answers (one JSON object per line).
const ContentType = "application/x-ndjson"

// Wanted reports whether the client accepts a newline-delimited JSON stream.
func Wanted(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == ContentType {
			return true
		}
	}
	return false
}

// Event is one line of a process stream (API.md §6): the document's
// ProcessEvent.
type Event = apitypes.ProcessEvent

// TypeEnd is the last line of a stream cut short because its sandbox left
// running (paused, deleted, timed out).
const TypeEnd = apitypes.ProcessEventTypeEnd

// Writer writes a 200 stream of JSON lines, flushing each one as it is
// produced. Output chunks split inside a UTF-8 character are re-joined, so
// text stays "data"; bytes that are not UTF-8 go as "dataB64".
type Writer struct {
	Started bool // the 200 and at least one line are out
	Exited  bool // the process's "exit" line is out (it is last)
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	enc     *json.Encoder
	carry   map[string][]byte
	line    []byte // a data line being encoded, reused (see data)
}

// New prepares a stream answering r; the status line goes out with the
// first line, so a failure before it is still an ordinary JSON error.
func New(w http.ResponseWriter, r *http.Request) *Writer {
	return &Writer{w: w, r: r, rc: http.NewResponseController(w), enc: json.NewEncoder(w), carry: map[string][]byte{}}
}

// line writes one object and flushes it; an error means the client is gone.
func (n *Writer) Line(v any) error {
	n.start()
	if err := n.enc.Encode(v); err != nil {
		return err
	}
	return n.rc.Flush()
}

// start sends the status line and headers before the first line.
func (n *Writer) start() {
	if !n.Started {
		n.Started = true
		n.w.Header().Set("Content-Type", ContentType)
		n.w.Header().Set("Cache-Control", "no-store")
		n.w.Header().Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
}

// Event writes a process event; it fits compute.Emit.
func (n *Writer) Event(ev compute.ProcessEvent) error {
	switch ev.Type {
	case compute.EventStart:
		return n.Line(Event{Type: apitypes.ProcessEventType(ev.Type), Pid: &ev.PID})
	case compute.EventExit:
		if err := n.Flush(); err != nil {
			return err
		}
		n.Exited = true
		return n.Line(Event{Type: apitypes.ProcessEventType(ev.Type), ExitCode: &ev.ExitCode})
	}
	data := ev.Data // not kept past this call, so not copied unless joined
	if held := n.carry[ev.Type]; len(held) > 0 {
		data = append(held, ev.Data...)
	}
	n.carry[ev.Type] = nil
	if !utf8.Valid(data) {
		// Keep an incomplete last character for the next chunk.
		i := len(data) - 1
		for i > 0 && len(data)-i < utf8.UTFMax && !utf8.RuneStart(data[i]) {
			i--
		}
		if i >= 0 && !utf8.FullRune(data[i:]) {
			n.carry[ev.Type] = append([]byte(nil), data[i:]...)
			data = data[:i]
		}
	}
	return n.data(ev.Type, data)
}

func (n *Writer) data(typ string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if utf8.Valid(data) {
		// The line encoding/json writes for Event{Type, Data}, encoded into
		// a buffer kept across lines: a stream moves the sandbox's output
		// through here, and json's copies of it would be garbage in
		// proportion (compute's bounds.go on why that costs memory).
		n.line = append(n.line[:0], `{"type":`...)
		n.line = AppendString(n.line, []byte(typ))
		n.line = append(n.line, `,"data":`...)
		n.line = append(AppendString(n.line, data), "}\n"...)
		n.start()
		_, err := n.w.Write(n.line)
		if cap(n.line) > maxLineKept {
			n.line = nil // a rare large chunk (a buffered provider's whole output) is not kept
		}
		if err != nil {
			return err
		}
		return n.rc.Flush()
	}
	return n.Line(Event{Type: apitypes.ProcessEventType(typ), DataB64: data}) // encoded as base64
}

// Flush writes output held back for an incomplete UTF-8 character.
func (n *Writer) Flush() error {
	for _, typ := range []string{compute.EventStdout, compute.EventStderr} {
		if err := n.data(typ, n.carry[typ]); err != nil {
			return err
		}
		n.carry[typ] = nil
	}
	return nil
}

// End writes ev (type "end") as the stream's last line, after any held
// output. Before the stream began, the sandbox's change is an ordinary 409.
func (n *Writer) End(ev Event) error {
	if !n.Started {
		return httpx.Conflict(ev.Detail)
	}
	_ = n.Flush()
	_ = n.Line(ev)
	return nil
}

// Finish ends a stream with err: as the JSON error answer when nothing was
// sent yet, else as a last line of type "error" with the same code and
// detail (the status line is gone), logged when its code is a 5xx.
func (n *Writer) Finish(err error) error {
	if err == nil {
		return nil
	}
	if !n.Started {
		return err
	}
	_ = n.Flush()
	he := httpx.AsError(err) // an *httpx.Error or a domain error
	if he == nil {
		he = &httpx.Error{Code: http.StatusInternalServerError, Detail: "the stream failed; retry the request"}
	}
	if he.Code >= 500 {
		// The handler returns nil after this line, so httpx.Handler,
		// which logs the 5xx it writes, never sees it.
		httpx.LogServerError(n.r, he.Code, he.Detail, err)
	}
	_ = n.Line(Event{Type: apitypes.ProcessEventTypeError, Code: he.Code, Detail: he.Detail})
	return nil
}
