package scaleout_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// dbLink is the network path from one replica to PostgreSQL, which a test
// can cut and heal. While cut, nothing crosses it either way, and nothing is
// lost or refused: both ends just hear nothing more, as across a network
// partition (connections open during the cut hang in their handshake). Once
// healed, what was sent flows again and connections carry on, as TCP's
// retransmissions make them do after a short partition.
type dbLink struct {
	URL string // the database URL through the link

	mu    sync.Mutex
	open  chan struct{} // closed while bytes cross
	ln    net.Listener
	conns []net.Conn
	held  int
}

func startDBLink(t *testing.T, databaseURL string) *dbLink {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	l := &dbLink{URL: u.String(), open: make(chan struct{}), ln: ln}
	close(l.open)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, s)
			l.mu.Unlock()
			go l.pipe(s, c)
			go l.pipe(c, s)
		}
	}()
	t.Cleanup(func() {
		l.Heal()
		_ = ln.Close()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.conns {
			_ = c.Close()
		}
	})
	return l
}

// pipe copies src to dst, holding whatever it read while the link is cut;
// the end of src (once the link carries it) ends dst.
func (l *dbLink) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		l.wait()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			_ = dst.Close()
			return
		}
	}
}

func (l *dbLink) wait() {
	l.mu.Lock()
	ch := l.open
	select {
	case <-ch:
	default:
		l.held++
	}
	l.mu.Unlock()
	<-ch
}

// Held is how many reads waited for the link to heal.
func (l *dbLink) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// Cut stops every byte on the link.
func (l *dbLink) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
		l.open = make(chan struct{})
	default:
	}
}

// Heal lets bytes cross again.
func (l *dbLink) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
	default:
		close(l.open)
	}
}
