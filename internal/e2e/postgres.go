package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// FreshPostgres creates an empty database on HOPPER_TEST_POSTGRES for one
// test (dropped afterwards) and returns its URL. It skips the test when the
// variable is unset.
func FreshPostgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv("HOPPER_TEST_POSTGRES")
	if base == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to run hopper replicas on")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to HOPPER_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("hopper_e2e_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing HOPPER_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
