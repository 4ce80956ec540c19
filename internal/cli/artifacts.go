package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// artifactsOutput is what `artifacts --json` prints.
type artifactsOutput struct {
	TaskID    string              `json:"taskId"`
	RunID     *int                `json:"runId,omitempty"`
	Artifacts []tcclient.Artifact `json:"artifacts"`
}

func (a *app) artifacts(ctx context.Context, taskID string, runID int) error {
	if err := checkTaskID("taskId", taskID); err != nil {
		return err
	}
	arts, err := a.client.AllArtifacts(ctx, taskID, runID)
	if err != nil {
		return failure("listing artifacts of task "+taskID, err)
	}
	if arts == nil {
		arts = []tcclient.Artifact{}
	}
	if a.json {
		out := artifactsOutput{TaskID: taskID, Artifacts: arts}
		if runID >= 0 {
			out.RunID = &runID
		}
		return a.printJSON(out)
	}
	return RenderArtifacts(a.env.Stdout, arts)
}

// RenderArtifacts writes a table of artifacts.
func RenderArtifacts(w io.Writer, arts []tcclient.Artifact) error {
	if len(arts) == 0 {
		_, err := fmt.Fprintln(w, "No artifacts.")
		return err
	}
	t := newTable(w, "NAME", "STORAGE", "CONTENT TYPE", "EXPIRES")
	for _, art := range arts {
		t.row(art.Name, art.StorageType, art.ContentType, art.Expires.String())
	}
	if err := t.flush(); err != nil {
		return fmt.Errorf("writing artifacts: %w", err)
	}
	return nil
}

// GetArtifactOptions are the inputs of `task artifact get`.
type GetArtifactOptions struct {
	TaskID, Name string
	// Run selects a run; negative means the latest.
	Run int
	// Output is a file to write; empty means stdout.
	Output string
}

// artifactOutput is what `artifact get --json` prints.
type artifactOutput struct {
	TaskID      string `json:"taskId"`
	Name        string `json:"name"`
	StorageType string `json:"storageType"`
	URL         string `json:"url"`
	File        string `json:"file,omitempty"`
	Bytes       *int64 `json:"bytes,omitempty"`
}

func (a *app) getArtifact(ctx context.Context, opts GetArtifactOptions) error {
	if err := checkTaskID("taskId", opts.TaskID); err != nil {
		return err
	}
	var (
		ref *tcclient.ArtifactRedirect
		err error
	)
	if opts.Run >= 0 {
		ref, err = a.client.GetArtifact(ctx, opts.TaskID, opts.Run, opts.Name)
	} else {
		ref, err = a.client.GetLatestArtifact(ctx, opts.TaskID, opts.Name)
	}
	if err != nil {
		return failure(fmt.Sprintf("getting artifact %s of task %s", opts.Name, opts.TaskID), err)
	}
	out := artifactOutput{TaskID: opts.TaskID, Name: opts.Name, StorageType: ref.StorageType, URL: ref.URL}
	if a.json && opts.Output == "" {
		return a.printJSON(out)
	}
	body, err := a.open(ctx, ref.URL)
	if err != nil {
		return failure(fmt.Sprintf("downloading artifact %s of task %s", opts.Name, opts.TaskID), err)
	}
	defer body.Close()
	if opts.Output == "" {
		out := &lastByteWriter{w: a.env.Stdout}
		if _, err := io.Copy(out, body); err != nil {
			return failure(fmt.Sprintf("downloading artifact %s of task %s", opts.Name, opts.TaskID), err)
		}
		// On a terminal the shell prompt would follow the last line of a
		// file without a final newline; pipes get the bytes unchanged.
		if a.env.TTY && out.n > 0 && out.last != '\n' {
			_, err := io.WriteString(a.env.Stdout, "\n")
			return err
		}
		return nil
	}
	n, err := writeFileAtomic(opts.Output, body)
	if err != nil {
		return failure(fmt.Sprintf("saving artifact %s of task %s", opts.Name, opts.TaskID), err)
	}
	if a.json {
		out.File, out.Bytes = opts.Output, &n
		return a.printJSON(out)
	}
	fmt.Fprintf(a.env.Stderr, "Wrote %d bytes to %s\n", n, opts.Output)
	return nil
}

// lastByteWriter passes writes through, remembering how much was written
// and its last byte.
type lastByteWriter struct {
	w    io.Writer
	n    int64
	last byte
}

func (l *lastByteWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.n += int64(n)
		l.last = p[n-1]
	}
	return n, err
}

// writeFileAtomic writes r to name through a temporary file in the same
// directory, so an interrupted download never leaves a truncated file
// that looks complete.
func writeFileAtomic(name string, r io.Reader) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".part-*")
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", name, err)
	}
	n, err := io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return 0, fmt.Errorf("writing %s: %w", name, err)
	}
	return n, nil
}
