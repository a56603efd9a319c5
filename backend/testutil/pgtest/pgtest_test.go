package pgtest_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// Two databases of the shared cluster are distinct: a table created in one
// is absent from the other.
func TestDatabasesAreIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.Database(t), pgtest.Database(t)
	if a == b {
		t.Fatalf("two databases share a URL: %s", a)
	}
	ca, cb := connect(t, a), connect(t, b)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (v int); INSERT INTO only_in_a VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := ca.QueryRow(ctx, "SELECT v FROM only_in_a").Scan(&v); err != nil || v != 42 {
		t.Fatalf("read back in a: v=%d err=%v", v, err)
	}
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table of database a is visible in database b")
	}
	var da, db string
	if err := ca.QueryRow(ctx, "SELECT current_database()").Scan(&da); err != nil {
		t.Fatal(err)
	}
	if err := cb.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if da == db || da == "" {
		t.Fatalf("current_database: a=%q b=%q", da, db)
	}
}

// A test's own cluster serves queries, and its cleanup stops the server
// (the port refuses) and removes the directory.
func TestStartStopsAndRemovesOnCleanup(t *testing.T) {
	var c *pgtest.Cluster
	t.Run("cluster", func(t *testing.T) {
		c = pgtest.Start(t)
		conn := connect(t, c.NewDatabase(t))
		var one int
		if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("SELECT 1: %d %v", one, err)
		}
		if _, err := os.Stat(c.Dir); err != nil {
			t.Fatalf("cluster dir: %v", err)
		}
	})
	if c == nil {
		t.FailNow()
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s still there after cleanup (stat: %v)", c.Dir, err)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)), time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("port %d still accepts after cleanup", c.Port)
	}
}
