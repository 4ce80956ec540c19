package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// startChild runs the server as a child process (InProcessOptions.
// ServerCommand) on a free loopback port, and sends its root URL to ready
// once it answers ping. p.done receives its exit; cancelling runCtx stops
// it with SIGTERM, as an operator would.
func (p *InProcess) startChild(ctx, runCtx context.Context, opts InProcessOptions, spec, dataDir, token string, ready chan<- string) error {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	args := append(opts.ServerCommand[1:len(opts.ServerCommand):len(opts.ServerCommand)],
		"--listen", addr, "--db", spec, "--data-dir", dataDir, "--log-level", "warn",
		"--db-batches", strconv.Itoa(opts.DBBatches))
	cmd := exec.CommandContext(runCtx, opts.ServerCommand[0], args...)
	cmd.Env = append(os.Environ(), "HOPPER_ROOT_ACCESS_TOKEN="+token)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the server process %s: %w", opts.ServerCommand[0], err)
	}
	p.serverPID = cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		if runCtx.Err() != nil {
			err = nil // stopped on purpose
		}
		close(exited)
		p.done <- err
	}()
	rootURL := "http://" + addr
	go func() {
		for {
			resp, err := http.Get(rootURL + "/api/queue/v1/ping")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready <- rootURL
					return
				}
			}
			select {
			case <-exited:
				return
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return nil
}

// freeLoopbackAddr returns a loopback address with a port free just now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// pgBackends lists the PostgreSQL backends serving a database.
type pgBackends struct {
	url  string
	mu   sync.Mutex
	conn *pgx.Conn
}

func (b *pgBackends) pids() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b.conn == nil {
		conn, err := pgx.Connect(ctx, b.url)
		if err != nil {
			return nil
		}
		b.conn = conn
	}
	rows, err := b.conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := make([]int, len(pids))
	for i, pid := range pids {
		out[i] = int(pid)
	}
	return out
}

func (b *pgBackends) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil
	}
	err := b.conn.Close(context.Background())
	b.conn = nil
	return err
}

// Processes implements bench.Processes for this server: the child
// process, if the server runs in one, and the PostgreSQL backends of its
// database (on the same machine), if it uses PostgreSQL.
func (p *InProcess) Processes() (server, database []int) {
	if p.serverPID > 0 {
		server = []int{p.serverPID}
	}
	if p.dbURL != "" {
		p.backendsOnce.Do(func() {
			p.backends = &pgBackends{url: p.dbURL}
			p.cleanups = append(p.cleanups, p.backends.close)
		})
		database = p.backends.pids()
	}
	return server, database
}

// ServerPID is the child server's process id, 0 when the server runs in
// this process.
func (p *InProcess) ServerPID() int { return p.serverPID }
