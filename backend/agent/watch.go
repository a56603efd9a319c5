package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
)

// maxQueuedEvents bounds the events a watch holds for a reader that does
// not keep up (or a CreateWatcher nobody polls): the oldest are dropped.
const maxQueuedEvents = 10000

// watch follows one directory with inotify (fsnotify), and with recursive
// every directory below it, those created later included.
type watch struct {
	root         string
	recursive    bool
	includeEntry bool
	w            *fsnotify.Watcher

	mu      sync.Mutex
	queue   []*filesystem.FilesystemEvent
	changed chan struct{}
	err     error // the watch broke (e.g. its directory was removed)
	done    chan struct{}
}

func startWatch(root string, recursive, includeEntry bool) (*watch, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError(root, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is not a directory", root))
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("cannot watch %s: %v", root, err))
	}
	w := &watch{root: root, recursive: recursive, includeEntry: includeEntry, w: fw, changed: make(chan struct{}), done: make(chan struct{})}
	if err := w.add(root, false); err != nil {
		fw.Close()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("cannot watch %s: %v", root, err))
	}
	go w.run()
	return w, nil
}

// add watches dir (and, recursively, the directories below it). With
// report, what it finds is reported as created: it appeared in a new
// directory before that directory was watched.
func (w *watch) add(dir string, report bool) error {
	if !w.recursive {
		return w.w.Add(dir)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed meanwhile
		}
		if report && p != dir {
			w.push(fsnotify.Create, p)
		}
		if d.IsDir() {
			if err := w.w.Add(p); err != nil && p == dir {
				return err
			}
		}
		return nil
	})
}

func (w *watch) run() {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			w.mu.Lock()
			if w.err == nil && errors.Is(err, fsnotify.ErrEventOverflow) {
				// the kernel dropped events: say so in the stream's end
				w.err = err
			}
			w.wakeLocked()
			w.mu.Unlock()
		}
	}
}

func (w *watch) handle(ev fsnotify.Event) {
	if isUploadTemp(ev.Name) {
		return // an upload in progress: its file appears (Create) when renamed into place
	}
	for _, op := range []fsnotify.Op{fsnotify.Create, fsnotify.Write, fsnotify.Remove, fsnotify.Rename, fsnotify.Chmod} {
		if ev.Op.Has(op) {
			w.push(op, ev.Name)
		}
	}
	if ev.Op.Has(fsnotify.Create) && w.recursive {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			_ = w.add(ev.Name, true)
		}
	}
	if (ev.Op.Has(fsnotify.Remove) || ev.Op.Has(fsnotify.Rename)) && ev.Name == w.root {
		w.mu.Lock()
		if w.err == nil {
			w.err = fmt.Errorf("the watched directory %s was removed or moved", w.root)
		}
		w.wakeLocked()
		w.mu.Unlock()
	}
}

var eventTypes = map[fsnotify.Op]filesystem.EventType{
	fsnotify.Create: filesystem.EventType_EVENT_TYPE_CREATE,
	fsnotify.Write:  filesystem.EventType_EVENT_TYPE_WRITE,
	fsnotify.Remove: filesystem.EventType_EVENT_TYPE_REMOVE,
	fsnotify.Rename: filesystem.EventType_EVENT_TYPE_RENAME,
	fsnotify.Chmod:  filesystem.EventType_EVENT_TYPE_CHMOD,
}

// push queues one event, named relative to the watched directory as envd does.
func (w *watch) push(op fsnotify.Op, p string) {
	name, err := filepath.Rel(w.root, p)
	if err != nil {
		name = p
	}
	ev := &filesystem.FilesystemEvent{Name: name, Type: eventTypes[op]}
	if w.includeEntry && op != fsnotify.Remove && op != fsnotify.Rename {
		if fi, err := os.Lstat(p); err == nil {
			ev.Entry = entryInfo(p, fi)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) >= maxQueuedEvents {
		w.queue[0] = nil
		w.queue = w.queue[1:]
	}
	w.queue = append(w.queue, ev)
	w.wakeLocked()
}

func (w *watch) wakeLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// take empties the queue.
func (w *watch) take() ([]*filesystem.FilesystemEvent, <-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue
	w.queue = nil
	return q, w.changed, w.err
}

func (w *watch) close() {
	w.w.Close()
	<-w.done
}

// watchers are the CreateWatcher ones, by id.
type watchers struct {
	mu   sync.Mutex
	byID map[string]*watch
}

func newWatchers() *watchers { return &watchers{byID: map[string]*watch{}} }

func (ws *watchers) closeAll() {
	ws.mu.Lock()
	all := ws.byID
	ws.byID = map[string]*watch{}
	ws.mu.Unlock()
	for _, w := range all {
		w.close()
	}
}

// WatchDir streams a start event, then the directory's events while the
// client listens.
func (f *Filesystem) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	p, err := requestPath(req.Header(), req.Msg.GetPath(), "path")
	if err != nil {
		return err
	}
	w, err := startWatch(p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer w.close()
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	keepAlive := time.NewTicker(keepAliveEvery)
	defer keepAlive.Stop()
	for {
		evs, changed, werr := w.take()
		for _, ev := range evs {
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return err
			}
		}
		if werr != nil {
			return connect.NewError(connect.CodeAborted, werr)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-keepAlive.C:
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		}
	}
}

func (f *Filesystem) CreateWatcher(_ context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	p, err := requestPath(req.Header(), req.Msg.GetPath(), "path")
	if err != nil {
		return nil, err
	}
	w, err := startWatch(p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	f.watchers.mu.Lock()
	f.watchers.byID[id] = w
	f.watchers.mu.Unlock()
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: id}), nil
}

func (f *Filesystem) watcher(id string) (*watch, error) {
	f.watchers.mu.Lock()
	defer f.watchers.mu.Unlock()
	w, ok := f.watchers.byID[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", id))
	}
	return w, nil
}

func (f *Filesystem) GetWatcherEvents(_ context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	w, err := f.watcher(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	evs, _, werr := w.take()
	if werr != nil && len(evs) == 0 {
		return nil, connect.NewError(connect.CodeAborted, werr)
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *Filesystem) RemoveWatcher(_ context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	w, err := f.watcher(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	f.watchers.mu.Lock()
	delete(f.watchers.byID, req.Msg.GetWatcherId())
	f.watchers.mu.Unlock()
	w.close()
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
