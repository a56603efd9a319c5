package templatebuild

import (
	"bytes"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// maxLine bounds one log line of a step's output.
const maxLine = 4096

// logger serialises a build's entries to the caller's sink and bounds the
// bytes of output the steps may put there: past the budget one warning
// says the rest was dropped (the build's own messages still pass).
type logger struct {
	mu      sync.Mutex
	sink    func(compute.TemplateLogEntry)
	left    int
	dropped bool
}

func newLogger(sink func(compute.TemplateLogEntry), budget int) *logger {
	if sink == nil {
		sink = func(compute.TemplateLogEntry) {}
	}
	return &logger{sink: sink, left: budget}
}

// info logs one of the build's own messages.
func (l *logger) info(step, msg string) { l.entry("info", step, msg) }

func (l *logger) entry(level, step, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sink(compute.TemplateLogEntry{Time: time.Now().UTC(), Level: level, Step: step, Message: msg})
}

// output logs one line of a process's output, within the budget.
func (l *logger) output(step, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped {
		return
	}
	if l.left -= len(line); l.left < 0 {
		l.dropped = true
		l.sink(compute.TemplateLogEntry{Time: time.Now().UTC(), Level: "warn", Step: step,
			Message: "the build's output exceeded its log limit; the rest of it is not kept (the build goes on)"})
		return
	}
	l.sink(compute.TemplateLogEntry{Time: time.Now().UTC(), Level: "info", Step: step, Message: line})
}

// lineWriter splits a stream into lines for emit, cutting lines longer
// than maxLine and replacing invalid UTF-8.
type lineWriter struct {
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) > maxLine {
				w.flush()
			}
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.flush()
		p = p[i+1:]
	}
	return n, nil
}

// flush emits the pending line, if any.
func (w *lineWriter) flush() {
	if len(w.buf) == 0 {
		return
	}
	line := w.buf
	if len(line) > maxLine {
		line = line[:maxLine]
	}
	s := strings.TrimRight(strings.ToValidUTF8(string(line), string(utf8.RuneError)), "\r")
	w.buf = w.buf[:0]
	w.emit(s)
}
