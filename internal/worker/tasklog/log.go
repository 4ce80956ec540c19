// Package tasklog implements a task's backing log (docs/contract/worker.md §3): a file
// that receives everything the worker says about a run and all command
// output, with the Taskcluster line prefixes log parsers key on, and a live
// log server that lets a user follow the file over HTTP while the task runs.
package tasklog

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Log is an append-only task log backed by a file. It is safe for
// concurrent use: command output and worker messages may interleave, but
// each Write is atomic.
type Log struct {
	mu   sync.Mutex
	f    *os.File
	size int64
	// failed is the first write to the file that failed (a full disk,
	// say). From then on nothing more goes to the file: command output is
	// counted in lost, and worker lines go to spill, in memory, which
	// readers see after the file's content.
	failed  error
	lost    int64
	spill   []byte
	lastNL  bool
	closed  bool
	changed chan struct{} // closed and replaced on every write and on Close
	now     func() time.Time
}

// Create creates (truncating) the log file at path.
func Create(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating task log: %w", err)
	}
	return &Log{f: f, lastNL: true, changed: make(chan struct{}), now: time.Now}, nil
}

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("task log is closed")

// Write appends raw bytes (command output).
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeLocked(p)
}

func (l *Log) writeLocked(p []byte) (int, error) {
	if l.closed {
		return 0, ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	if l.failed != nil {
		// Command output is dropped, not refused: the copying goes on, so
		// the command never blocks on a pipe nobody reads.
		l.lost += int64(len(p))
		return len(p), nil
	}
	n, err := l.f.WriteAt(p, l.size)
	l.size += int64(n)
	if n > 0 {
		l.lastNL = p[n-1] == '\n'
	}
	if err != nil {
		l.failed = fmt.Errorf("writing %s: %w", l.f.Name(), err)
		l.lost += int64(len(p) - n)
		l.spillLine(errorPrefix, fmt.Sprintf("The task log is truncated here: %v. "+
			"The commands' further output is lost; the worker's own messages follow.", l.failed))
	}
	if n > 0 || err != nil {
		l.notify()
	}
	return len(p), nil
}

// notify wakes followers.
func (l *Log) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// maxSpill bounds the worker lines kept in memory after the file failed.
const maxSpill = 1 << 20

// spillLine adds a worker line to the in-memory part of the log.
func (l *Log) spillLine(prefix, text string) {
	if len(l.spill)+len(prefix)+len(text)+2 > maxSpill {
		return
	}
	if !l.lastNL {
		l.spill = append(l.spill, '\n')
	}
	l.spill = append(l.spill, prefix...)
	l.spill = append(l.spill, text...)
	l.spill = append(l.spill, '\n')
	l.lastNL = true
}

// Truncated reports whether the log lost output because its file could
// not be written: how many bytes, and why (nil: nothing was lost).
func (l *Log) Truncated() (lost int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost, l.failed
}

// Prefixes of worker lines (docs/contract/worker.md §3).
const (
	infoPrefix  = "[taskcluster %s] "
	warnPrefix  = "[taskcluster:warn %s] "
	errorPrefix = "[taskcluster:error] "
)

func (l *Log) line(prefix string, withTime bool, format string, args []any) {
	msg := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	if !l.lastNL {
		// Markers must start a line even when a command's output did not
		// end with a newline.
		b.WriteByte('\n')
	}
	p := prefix
	if withTime {
		p = fmt.Sprintf(prefix, l.now().UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if l.closed {
		return
	}
	if l.failed != nil {
		for _, ln := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
			l.spillLine(p, ln)
		}
		l.notify()
		return
	}
	for _, ln := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		b.WriteString(p)
		b.WriteString(ln)
		b.WriteByte('\n')
	}
	_, _ = l.writeLocked([]byte(b.String()))
}

// Infof writes an informational worker line.
func (l *Log) Infof(format string, args ...any) { l.line(infoPrefix, true, format, args) }

// Warnf writes a warning line.
func (l *Log) Warnf(format string, args ...any) { l.line(warnPrefix, true, format, args) }

// Errorf writes an error line.
func (l *Log) Errorf(format string, args ...any) { l.line(errorPrefix, false, format, args) }

// Close ends the log: later writes fail and followers finish. The file stays
// readable through Reader and GzipTo until Release.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.changed)
}

// Release closes the underlying file; call it after the log was uploaded.
func (l *Log) Release() error {
	l.Close()
	if err := l.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("closing task log: %w", err)
	}
	return nil
}

// Size returns the number of bytes the log holds so far.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size + int64(len(l.spill))
}

// snapshot returns the size of the file's part, the in-memory part,
// whether the log is closed, and a channel closed at the next change.
func (l *Log) snapshot() (int64, []byte, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size, l.spill[:len(l.spill):len(l.spill)], l.closed, l.changed
}

// Reader returns a reader of everything written so far. It reads through
// the log's own file descriptor, so it works even if the task deleted the
// file from its directory; after a failed write, the worker lines kept in
// memory follow the file's content.
func (l *Log) Reader() io.Reader {
	size, spill, _, _ := l.snapshot()
	return io.MultiReader(io.NewSectionReader(l.f, 0, size), bytes.NewReader(spill))
}

// GzipTo writes the gzip-compressed log to w.
func (l *Log) GzipTo(w io.Writer) error {
	zw := gzip.NewWriter(w)
	if _, err := io.Copy(zw, l.Reader()); err != nil {
		return fmt.Errorf("compressing task log: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing task log: %w", err)
	}
	return nil
}

// Follow copies the log to w from the start, then keeps copying new output
// as it is written, until the log is closed (returns nil) or ctx ends.
// flush, if non-nil, is called after each chunk so HTTP clients see output
// promptly.
func (l *Log) Follow(ctx context.Context, w io.Writer, flush func()) error {
	return l.FollowFrom(ctx, 0, w, flush)
}

// FollowFrom is Follow from byte off on: a reader that lost its stream
// resumes where it was, with nothing lost or repeated.
func (l *Log) FollowFrom(ctx context.Context, off int64, w io.Writer, flush func()) error {
	buf := make([]byte, 32<<10)
	for {
		size, spill, closed, changed := l.snapshot()
		for off < size {
			n, err := l.f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return fmt.Errorf("streaming task log: %w", werr)
				}
				off += int64(n)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("reading task log: %w", err)
			}
		}
		if off >= size && off < size+int64(len(spill)) {
			if _, werr := w.Write(spill[off-size:]); werr != nil {
				return fmt.Errorf("streaming task log: %w", werr)
			}
			off = size + int64(len(spill))
		}
		if flush != nil {
			flush()
		}
		if closed {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
