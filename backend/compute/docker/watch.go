package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/docker/docker/api/types/events"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Watch implements compute.Watcher: die, oom and destroy events of the
// managed containers in this provider's scope become Events (Status exited; "" for destroy, where Get answers
// not found). The stream is reopened after an error, replaying from the last
// event seen, until ctx is done; then the channel is closed.
func (p *Provider) Watch(ctx context.Context) <-chan compute.Event {
	out := make(chan compute.Event, 64)
	go func() {
		defer close(out)
		since := strconv.FormatInt(time.Now().Unix(), 10)
		pause := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 2, MaxInterval: 5 * time.Second}
		for ctx.Err() == nil {
			f := p.scopeFilter()
			f.Add("type", string(events.ContainerEventType))
			for _, a := range []events.Action{events.ActionDie, events.ActionOOM, events.ActionDestroy} {
				f.Add("event", string(a))
			}
			msgs, errs := p.cli.Events(ctx, events.ListOptions{Since: since, Filters: f})
		stream:
			for {
				select {
				case m := <-msgs:
					pause.Reset()
					since = fmt.Sprintf("%d.%09d", m.TimeNano/1e9, m.TimeNano%1e9)
					ev, ok := toEvent(m)
					if !ok {
						continue
					}
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				case _ = <-errs: // the stream ended, whatever the cause: reconnect
					break stream
				}
			}
			select { // reconnect after a growing pause, not in a hot loop
			case <-ctx.Done():
			case <-time.After(pause.NextBackOff()):
			}
		}
	}()
	return out
}

func toEvent(m events.Message) (compute.Event, bool) {
	name := m.Actor.Attributes["name"]
	if strings.HasPrefix(name, poolPrefix) {
		return compute.Event{}, false // unclaimed pool container: no record to wake
	}
	if m.Actor.Attributes[compute.LabelGroup] != "" {
		return compute.Event{}, false // a task service: its group watches it (Groups.Watch)
	}
	ev := compute.Event{RecordID: recordID(name, m.Actor.Attributes), Ref: compute.Ref{ID: m.Actor.ID}}
	if m.Action != events.ActionDestroy {
		ev.Status = compute.StatusExited
	}
	return ev, true
}
