package worker

import (
	"context"
	"fmt"
	"log/slog"
)

// Engine names accepted by Config.Engine (`hopper worker --engine`).
const (
	// EngineProcess runs generic-worker native payloads as host processes.
	EngineProcess = "process"
	// EngineDocker runs docker-worker payloads in containers of a Docker
	// daemon.
	EngineDocker = "docker"
)

// engine runs the task code of the one payload format it understands.
// Everything around it — claims and reclaims, superseding, the task log and
// live log, uploads, resolution — is the shared run machinery of taskRun,
// so both engines resolve, log and supersede alike.
type engine interface {
	// headerName is how task log headers name the engine.
	headerName() string
	// recover is called once before the first claim to clean up what a
	// previous life of this worker left behind (a worker killed with
	// SIGKILL cannot clean up after itself).
	recover(ctx context.Context) error
	// prepare validates the run's payload, sets r.logs, r.backing and
	// r.liveLog, starts the features it asks for and records any problem
	// on r. It returns the task, or nil when the payload could not even be
	// read (then nothing runs and no payload artifact is collected).
	prepare(r *taskRun) engineTask
}

// engineTask is one run's task code as an engine prepared it.
type engineTask interface {
	// run executes the task code (called only when prepare recorded no
	// problem) and records its outcome on the run.
	run()
	// uploads lists the payload artifacts to publish after run, including
	// error artifacts for missing ones.
	uploads() []artifactUpload
	// cleanup releases what the task holds (containers, caches); it is
	// called exactly once, whatever happened before.
	cleanup()
}

// newEngine builds the engine cfg names.
func newEngine(cfg *Config, logger *slog.Logger) (engine, error) {
	switch cfg.Engine {
	case EngineProcess:
		return &processEngine{cfg: cfg, logger: logger}, nil
	case EngineDocker:
		return newDockerEngine(cfg)
	}
	return nil, fmt.Errorf("unknown engine %q (want %s or %s)", cfg.Engine, EngineProcess, EngineDocker)
}
