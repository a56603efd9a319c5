package notify

import (
	"testing"
	"time"
)

func TestHub(t *testing.T) {
	t.Parallel()
	var h Hub
	a, releaseA := h.Wait("x")
	b, releaseB := h.Wait("x")
	other, releaseO := h.Wait("y")
	h.Notify("x")
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatal("waiter not woken")
		}
	}
	select {
	case <-other:
		t.Fatal("another key woken")
	default:
	}
	releaseA()
	releaseB()
	releaseB() // idempotent
	releaseO()
	if h.Len() != 0 {
		t.Fatalf("%d keys left after release", h.Len())
	}
	h.Notify("nobody") // no waiter: no-op
}

// NotifyAll wakes the waiters of every key and leaves no entry behind.
func TestNotifyAll(t *testing.T) {
	var h Hub
	a, ra := h.Wait("a")
	b, rb := h.Wait("b")
	defer ra()
	defer rb()
	h.NotifyAll()
	for name, ch := range map[string]<-chan struct{}{"a": a, "b": b} {
		select {
		case <-ch:
		default:
			t.Fatalf("the waiter of %s was not woken", name)
		}
	}
	if h.Len() != 0 {
		t.Fatalf("%d keys left after NotifyAll", h.Len())
	}
}
