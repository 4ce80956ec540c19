package worker

// Interactive docker tasks: shells are `docker exec` sessions in the task's
// container. A container stops with its command, so an interactive task
// whose command ended is kept alive in a container of its own: the task's
// container committed to an image (its files as the command left them)
// and started again from it, with the task's configuration and a command
// that only waits.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/interactive"
)

// dockerShells is where an interactive docker task's shells run.
type dockerShells struct {
	t  *dockerTask
	mu sync.Mutex
	// container is the container shells exec into: the task's while its
	// command runs, then the kept-alive one.
	container string
	// keptImage and keptContainer are the kept-alive container and its
	// image, removed when the task ends.
	keptImage, keptContainer string
}

func (d *dockerShells) current() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.container
}

// start execs a shell (bash where the image has it, else sh) on a
// terminal in the current container.
func (d *dockerShells) start(size interactive.Size) (shellProcess, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := d.t.e.client
	id, err := c.CreateExec(ctx, d.current(), &dockerapi.ExecConfig{
		// The shell's process group id is written first, for Kill; the
		// reader strips that line.
		Cmd: []string{"/bin/sh", "-c", `echo "hopper-shell-pid=$$"; if command -v bash >/dev/null 2>&1; then exec bash -i; fi; exec sh -i`},
		Env: []string{"TERM=xterm-256color"}, Tty: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, err
	}
	stream, err := c.StartExec(context.Background(), id)
	if err != nil {
		return nil, err
	}
	s := &execShell{d: d, id: id, container: d.current(), stream: stream, done: make(chan struct{})}
	_ = s.Resize(size)
	return s, nil
}

// execShell is one shell exec'd in a container.
type execShell struct {
	d         *dockerShells
	id        string
	container string
	stream    io.ReadWriteCloser

	mu   sync.Mutex
	pid  string // the shell's pid in the container, from its first line
	head []byte // output before that line was complete
	done chan struct{}
	once sync.Once
}

func (s *execShell) Read(b []byte) (int, error) {
	for {
		n, err := s.stream.Read(b)
		s.mu.Lock()
		if s.pid != "" || n == 0 {
			s.mu.Unlock()
			if err != nil {
				s.once.Do(func() { close(s.done) })
			}
			return n, err
		}
		// Until the pid line is whole, hold the output back.
		s.head = append(s.head, b[:n]...)
		if i := strings.IndexByte(string(s.head), '\n'); i >= 0 {
			line := strings.TrimSpace(string(s.head[:i]))
			s.pid = strings.TrimPrefix(line, "hopper-shell-pid=")
			rest := s.head[i+1:]
			s.head = nil
			s.mu.Unlock()
			m := copy(b, rest)
			if m > 0 || err != nil {
				if err != nil {
					s.once.Do(func() { close(s.done) })
				}
				return m, err
			}
			continue
		}
		s.mu.Unlock()
		if err != nil {
			s.once.Do(func() { close(s.done) })
			return 0, err
		}
	}
}

func (s *execShell) Write(b []byte) (int, error) { return s.stream.Write(b) }

func (s *execShell) Resize(size interactive.Size) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.d.t.e.client.ResizeExec(ctx, s.id, size.Rows, size.Cols)
}

// Wait waits for the exec's stream to end and returns its exit code.
func (s *execShell) Wait() int {
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		st, err := s.d.t.e.client.InspectExec(ctx, s.id)
		if err != nil {
			return -1
		}
		if !st.Running {
			return st.ExitCode
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill ends the shell's process group inside the container (the daemon
// keeps an exec running when its client goes), then detaches.
func (s *execShell) Kill() {
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	if pid != "" && strings.Trim(pid, "0123456789") == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := s.d.t.e.client
		if id, err := c.CreateExec(ctx, s.container, &dockerapi.ExecConfig{Cmd: []string{"/bin/sh", "-c", "kill -9 -" + pid + " 2>/dev/null || kill -9 " + pid}}); err == nil {
			if stream, err := c.StartExec(ctx, id); err == nil {
				_, _ = io.Copy(io.Discard, stream)
				stream.Close()
			}
		}
	}
	s.stream.Close()
}

func (s *execShell) Close() error { return s.stream.Close() }

// keepAlive keeps an interactive task alive after its command in a
// container made from the stopped one, while the payload's keep-alive
// lasts or a shell is attached; then removes it.
func (d *dockerShells) keepAlive(cfg *dockerapi.ContainerConfig) {
	t, r := d.t, d.t.r
	if r.lost() || r.aborting() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := t.e.client
	name := fmt.Sprintf("hopper-%s-%d-interactive", r.claim.TaskID, r.claim.RunID)
	image, err := c.CommitContainer(ctx, t.containerID, "hopper-interactive", strings.ToLower(r.claim.TaskID)+"-"+fmt.Sprint(r.claim.RunID))
	if err != nil {
		r.log.Warnf("The task cannot stay alive for shells: %v", err)
		return
	}
	d.keptImage = image
	kept := *cfg
	kept.Image = image
	kept.Entrypoint = []string{"/bin/sh", "-c", "while :; do sleep 3600; done"}
	kept.Cmd = nil
	kept.Labels = map[string]string{}
	for k, v := range cfg.Labels {
		kept.Labels[k] = v
	}
	id, err := c.CreateContainer(ctx, name, &kept)
	if err == nil {
		d.keptContainer = id
		err = c.StartContainer(ctx, id)
	}
	if err != nil {
		r.log.Warnf("The task cannot stay alive for shells: %v", err)
		return
	}
	d.mu.Lock()
	d.container = id
	d.mu.Unlock()
	r.keepAlive(keepAliveOf(t.pl.Interactive.KeepAlive))
}

// close removes the kept-alive container and its image.
func (d *dockerShells) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := d.t.e.client
	if d.keptContainer != "" {
		if err := c.RemoveContainer(ctx, d.keptContainer); err != nil {
			d.t.r.logger.Error("removing the kept-alive container", "container", d.keptContainer, "error", err)
		}
	}
	if d.keptImage != "" {
		if err := c.RemoveImage(ctx, d.keptImage); err != nil && !dockerapi.IsNotFound(err) {
			d.t.r.logger.Error("removing the kept-alive image", "image", d.keptImage, "error", err)
		}
	}
}
