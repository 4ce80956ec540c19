package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

// Duration is a time.Duration that config files may write as a Go duration
// string ("90s", "5m") or as a number of seconds.
type Duration struct {
	time.Duration
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	return d.parse(n.Value)
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	return d.parse(strings.Trim(string(b), `"`))
}

// MarshalJSON renders the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) parse(s string) error {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		d.Duration = time.Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a Go duration like \"90s\" or a number of seconds", s)
	}
	d.Duration = v
	return nil
}

// CredentialsConfig are the worker's own credentials.
type CredentialsConfig struct {
	ClientID    string `yaml:"clientId" json:"clientId"`
	AccessToken string `yaml:"accessToken" json:"accessToken"`
	Certificate string `yaml:"certificate" json:"certificate,omitempty"`
}

// SupersedingConfig holds the superseding settings of docs/contract/worker.md §5.2. The
// worker itself only reads Enabled (to decide whether to run the
// superseding step); the rest is the step's (superseding.Settings).
type SupersedingConfig struct {
	// Enabled turns superseding on (default true).
	Enabled *bool `yaml:"enabled" json:"enabled,omitempty"`
	// Order is "ascending" (DefaultSupersedingOrder) or "descending".
	Order string `yaml:"order" json:"order,omitempty"`
	// Timeout bounds the superseder request (default 5 s).
	Timeout Duration `yaml:"timeout" json:"timeout,omitzero"`
	// MaxTasks caps the list length (default 32).
	MaxTasks int `yaml:"maxTasks" json:"maxTasks,omitempty"`
	// AllowedURLPrefixes, when non-empty, is the allow-list of superseder
	// URLs.
	AllowedURLPrefixes []string `yaml:"allowedUrlPrefixes" json:"allowedUrlPrefixes,omitempty"`
	// RunIDZeroOnly reproduces docker-worker's "claim run 0 only".
	RunIDZeroOnly bool `yaml:"runIdZeroOnly" json:"runIdZeroOnly,omitempty"`
}

// Config is the worker configuration; every `hopper worker` flag maps to a
// field. Zero values mean "use the default" (see Normalize).
type Config struct {
	// RootURL is the Taskcluster deployment root.
	RootURL string `yaml:"rootUrl" json:"rootUrl"`
	// Credentials are the worker's credentials.
	Credentials CredentialsConfig `yaml:"credentials" json:"credentials"`
	// TaskQueueID is "<provisionerId>/<workerType>"; alternatively set
	// ProvisionerID and WorkerType.
	TaskQueueID   string `yaml:"taskQueueId" json:"taskQueueId,omitempty"`
	ProvisionerID string `yaml:"provisionerId" json:"provisionerId,omitempty"`
	WorkerType    string `yaml:"workerType" json:"workerType,omitempty"`
	// WorkerGroup and WorkerID identify this worker (defaults:
	// DefaultWorkerGroup and this host's name).
	WorkerGroup string `yaml:"workerGroup" json:"workerGroup"`
	WorkerID    string `yaml:"workerId" json:"workerId"`
	// Capacity is the number of concurrent runs (DefaultCapacity, max 255).
	Capacity int `yaml:"capacity" json:"capacity,omitempty"`
	// WorkDir is the base of TasksDir, CachesDir and DownloadsDir (default
	// DefaultWorkDir).
	WorkDir      string `yaml:"workDir" json:"workDir,omitempty"`
	TasksDir     string `yaml:"tasksDir" json:"tasksDir,omitempty"`
	CachesDir    string `yaml:"cachesDir" json:"cachesDir,omitempty"`
	DownloadsDir string `yaml:"downloadsDir" json:"downloadsDir,omitempty"`
	// MaxTaskRunTime is the upper bound for payload.maxRunTime, in seconds
	// (default 86400).
	MaxTaskRunTime int `yaml:"maxTaskRunTime" json:"maxTaskRunTime,omitempty"`
	// Feature switches (all default true).
	EnableLiveLog          *bool `yaml:"enableLiveLog" json:"enableLiveLog,omitempty"`
	EnableTaskclusterProxy *bool `yaml:"enableTaskclusterProxy" json:"enableTaskclusterProxy,omitempty"`
	EnableMounts           *bool `yaml:"enableMounts" json:"enableMounts,omitempty"`
	// CleanUpTaskDirs removes task directories after each run (default true).
	CleanUpTaskDirs *bool `yaml:"cleanUpTaskDirs" json:"cleanUpTaskDirs,omitempty"`
	// LiveLogBindAddress is where live-log servers listen and
	// LiveLogPublicHost the host name put in live-log URLs (both default
	// 127.0.0.1).
	LiveLogBindAddress string `yaml:"liveLogBindAddress" json:"liveLogBindAddress,omitempty"`
	LiveLogPublicHost  string `yaml:"liveLogPublicHost" json:"liveLogPublicHost,omitempty"`
	// LiveLogTunnel serves the live logs through hopper instead: the
	// worker connects out to <rootUrl>/websocktunnel (with a token from
	// auth.websocktunnelToken, which takes
	// auth:websocktunnel-token:hopper/<workerGroup>.<workerId>) and needs
	// no inbound port (default false).
	LiveLogTunnel bool `yaml:"liveLogTunnel" json:"liveLogTunnel,omitempty"`
	// ClaimInterval is the minimum time between the start of a claimWork
	// call that brought no task and the next (default 5 s; tests use
	// less). After a call that brought tasks, the next starts as soon as
	// there is free capacity: the queue's long poll does the waiting.
	ClaimInterval Duration `yaml:"claimInterval" json:"claimInterval,omitzero"`
	// MaxClaimBackoff caps the back-off after consecutive claimWork
	// errors (default 60 s).
	MaxClaimBackoff Duration `yaml:"maxClaimBackoff" json:"maxClaimBackoff,omitzero"`
	// IdleTimeout stops the worker (exit 0) after this long without work;
	// zero means never.
	IdleTimeout Duration `yaml:"idleTimeout" json:"idleTimeout,omitzero"`
	// NumberOfTasksToRun stops the worker (exit 0) after claiming that many
	// tasks and finishing them; zero means unlimited.
	NumberOfTasksToRun int `yaml:"numberOfTasksToRun" json:"numberOfTasksToRun,omitempty"`
	// ShutdownUploadTimeout is the budget for uploads and reports of runs
	// aborted by an immediate shutdown (default 60 s).
	ShutdownUploadTimeout Duration `yaml:"shutdownUploadTimeout" json:"shutdownUploadTimeout,omitzero"`
	// MaxInternalErrors stops the worker (exit 69) after that many
	// consecutive runs ended in internal-error (default 5).
	MaxInternalErrors int `yaml:"maxInternalErrors" json:"maxInternalErrors,omitempty"`
	// WorkerLocation and InstanceType, when set, are exported to tasks as
	// TASKCLUSTER_WORKER_LOCATION and TASKCLUSTER_INSTANCE_TYPE.
	WorkerLocation string `yaml:"workerLocation" json:"workerLocation,omitempty"`
	InstanceType   string `yaml:"instanceType" json:"instanceType,omitempty"`
	// WorkerTypeMetadata is operator-supplied metadata printed in every
	// task log header.
	WorkerTypeMetadata map[string]any `yaml:"workerTypeMetadata" json:"workerTypeMetadata,omitempty"`
	// Superseding holds the superseding settings.
	Superseding SupersedingConfig `yaml:"superseding" json:"superseding"`
	// Engine is how tasks run: "process" (default; generic-worker native
	// payloads as host processes) or "docker" (docker-worker payloads in
	// containers).
	Engine string `yaml:"engine" json:"engine,omitempty"`
	// Docker holds the docker engine's settings.
	Docker DockerConfig `yaml:"docker" json:"docker"`
	// Isolation is the task sandbox (package sandbox): "strict" refuses
	// to start without every protection, "auto" (default) uses what the
	// machine offers and says what is missing, "none" runs commands as
	// plain child processes.
	Isolation string `yaml:"isolation" json:"isolation,omitempty"`
	// TaskNetwork is what a sandboxed task (own network namespace) may
	// reach: "outbound" (default) the machine's network through
	// slirp4netns, without the machine's loopback services; "none" only
	// its own loopback. The taskcluster proxy is reachable in both.
	TaskNetwork string `yaml:"taskNetwork" json:"taskNetwork,omitempty"`
	// MaxTaskMemoryMB limits every task's memory (0: no limit) and
	// MaxTaskProcesses its processes and threads (default 4096, so a fork
	// bomb cannot take the machine; -1: no limit); payload.limits may ask
	// for less. The docker engine applies MaxTaskProcesses as each
	// container's pids limit.
	MaxTaskMemoryMB  int `yaml:"maxTaskMemoryMB" json:"maxTaskMemoryMB,omitempty"`
	MaxTaskProcesses int `yaml:"maxTaskProcesses" json:"maxTaskProcesses,omitempty"`
	// CancelPollInterval is how often the worker asks the queue whether a
	// running task was cancelled or otherwise resolved (default 500 ms), so it
	// stops such a task long before its next reclaim.
	CancelPollInterval Duration `yaml:"cancelPollInterval" json:"cancelPollInterval,omitzero"`
	// SandboxInit starts the sandbox init (sandbox.Config.InitCommand);
	// the program embedding the worker sets it, e.g. to sandbox.SelfInit()
	// when its main dispatches to sandbox.InitMain. Empty: commands run
	// without PID and mount namespaces.
	SandboxInit []string `yaml:"-" json:"-"`
	// ConfigFile is the file LoadConfigFile read (it holds the worker's
	// credentials): commands in the sandbox see /dev/null in its place.
	ConfigFile string `yaml:"-" json:"-"`
}

// DockerConfig holds the settings of the docker engine.
type DockerConfig struct {
	// Host is the daemon's socket (default dockerapi.DefaultHost).
	Host string `yaml:"host" json:"host,omitempty"`
	// Network is the containers' network mode: "bridge" (as
	// docker-worker), "host" or "none". Empty (the default) means bridge
	// when the daemon has a bridge network, else none.
	Network string `yaml:"network" json:"network,omitempty"`
	// AllowPrivileged lets tasks with the scope
	// docker-worker:capability:privileged run privileged containers.
	AllowPrivileged bool `yaml:"allowPrivileged" json:"allowPrivileged,omitempty"`
	// AllowedDevices lists the capabilities.devices tasks may ask for
	// (with the scope docker-worker:capability:device:<name>): kvm,
	// hostSharedMemory, loopbackVideo, loopbackAudio.
	AllowedDevices []string `yaml:"allowedDevices" json:"allowedDevices,omitempty"`
	// MemoryMiB limits each container's memory (zero: no limit).
	MemoryMiB int64 `yaml:"memoryMiB" json:"memoryMiB,omitempty"`
	// CPUs limits each container's CPU time, in cores (zero: no limit).
	CPUs float64 `yaml:"cpus" json:"cpus,omitempty"`
}

// LoadConfigFile reads a YAML or JSON configuration file (JSON is valid
// YAML). Unknown keys are errors, so typos do not silently fall back to
// defaults.
func LoadConfigFile(path string) (Config, error) {
	var cfg Config
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("reading worker config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("parsing worker config %s: %w", path, err)
	}
	cfg.ConfigFile = path
	return cfg, nil
}

var (
	identifierRE    = ident.Identifier()
	provisionerIDRE = ident.Identifier()
	workerTypeRE    = ident.WorkerType()
)

func boolOr(p *bool, d bool) bool {
	if p == nil {
		return d
	}
	return *p
}

// Normalize fills defaults and checks the configuration, returning a copy.
// Every problem found is named in the error, not only the first.
func (c Config) Normalize() (Config, error) {
	var problems []string
	for _, step := range []func() []string{c.normalizeIdentity, c.normalizeResources, c.normalizeLoop, c.normalizeEngine} {
		problems = append(problems, step()...)
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("invalid worker config: %s", strings.Join(problems, "; "))
	}
	return c, nil
}

// normalizeIdentity checks where the worker connects, what it serves and
// who it is: root URL, task queue, worker group and id, credentials.
func (c *Config) normalizeIdentity() (problems []string) {
	if c.RootURL == "" {
		problems = append(problems, "rootUrl is required (--root-url or TASKCLUSTER_ROOT_URL)")
	}
	c.RootURL = strings.TrimRight(c.RootURL, "/")
	switch {
	case c.TaskQueueID == "" && (c.ProvisionerID != "" || c.WorkerType != ""):
		c.TaskQueueID = c.ProvisionerID + "/" + c.WorkerType
	case c.TaskQueueID != "" && (c.ProvisionerID != "" || c.WorkerType != "") &&
		c.TaskQueueID != c.ProvisionerID+"/"+c.WorkerType:
		problems = append(problems, "taskQueueId disagrees with provisionerId/workerType")
	}
	prov, wt, ok := strings.Cut(c.TaskQueueID, "/")
	if c.TaskQueueID == "" {
		problems = append(problems, "no task queue to serve: set --task-queue-id <provisionerId>/<workerType> (taskQueueId in the config file)")
	} else if !ok || !provisionerIDRE.MatchString(prov) || !workerTypeRE.MatchString(wt) {
		problems = append(problems, fmt.Sprintf("taskQueueId %q must be <provisionerId>/<workerType>", c.TaskQueueID))
	}
	c.ProvisionerID, c.WorkerType = prov, wt
	if c.WorkerGroup == "" {
		c.WorkerGroup = DefaultWorkerGroup
	}
	if c.WorkerID == "" {
		c.WorkerID = hostWorkerID()
	}
	if !identifierRE.MatchString(c.WorkerGroup) {
		problems = append(problems, fmt.Sprintf("workerGroup %q must match %s", c.WorkerGroup, identifierRE))
	}
	if !identifierRE.MatchString(c.WorkerID) {
		problems = append(problems, fmt.Sprintf("workerId %q must match %s", c.WorkerID, identifierRE))
	}
	if c.Credentials.ClientID == "" || c.Credentials.AccessToken == "" {
		problems = append(problems, "credentials.clientId and credentials.accessToken are required (--client-id and --access-token, or TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN)")
	}
	if c.Credentials.Certificate != "" && !json.Valid([]byte(c.Credentials.Certificate)) {
		problems = append(problems, "credentials.certificate must be JSON text")
	}
	return problems
}

// normalizeResources checks what the worker takes on: its capacity, the
// longest run it allows, and its directories (made absolute).
func (c *Config) normalizeResources() (problems []string) {
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	if c.Capacity < 1 || c.Capacity > 255 {
		problems = append(problems, "capacity must be 1..255")
	}
	if c.MaxTaskRunTime == 0 {
		c.MaxTaskRunTime = 86400
	}
	if c.MaxTaskRunTime < 1 {
		problems = append(problems, "maxTaskRunTime must be positive")
	}
	if c.WorkDir == "" {
		c.WorkDir = DefaultWorkDir
	}
	abs, err := filepath.Abs(c.WorkDir)
	if err != nil {
		problems = append(problems, fmt.Sprintf("workDir: %v", err))
	}
	c.WorkDir = abs
	for _, d := range []struct {
		dst  *string
		name string
	}{{&c.TasksDir, "tasks"}, {&c.CachesDir, "caches"}, {&c.DownloadsDir, "downloads"}} {
		if *d.dst == "" {
			*d.dst = filepath.Join(c.WorkDir, d.name)
		}
		if p, err := filepath.Abs(*d.dst); err == nil {
			*d.dst = p
		}
	}
	return problems
}

// normalizeLoop fills the settings of the claim loop and of the runs
// beside it: live log addresses, polling intervals, error limits,
// superseding.
func (c *Config) normalizeLoop() (problems []string) {
	if c.LiveLogBindAddress == "" {
		c.LiveLogBindAddress = "127.0.0.1"
	}
	if c.LiveLogPublicHost == "" {
		c.LiveLogPublicHost = c.LiveLogBindAddress
	}
	if c.ClaimInterval.Duration <= 0 {
		c.ClaimInterval.Duration = 5 * time.Second
	}
	if c.MaxClaimBackoff.Duration <= 0 {
		c.MaxClaimBackoff.Duration = 60 * time.Second
	}
	if c.ShutdownUploadTimeout.Duration <= 0 {
		c.ShutdownUploadTimeout.Duration = 60 * time.Second
	}
	if c.CancelPollInterval.Duration <= 0 {
		c.CancelPollInterval.Duration = 500 * time.Millisecond
	}
	if c.MaxInternalErrors == 0 {
		c.MaxInternalErrors = 5
	}
	if c.Superseding.Order == "" {
		c.Superseding.Order = DefaultSupersedingOrder
	}
	if c.Superseding.Order != "ascending" && c.Superseding.Order != "descending" {
		problems = append(problems, "superseding.order must be ascending or descending")
	}
	if c.Superseding.Timeout.Duration <= 0 {
		c.Superseding.Timeout.Duration = 5 * time.Second
	}
	if c.Superseding.MaxTasks == 0 {
		c.Superseding.MaxTasks = 32
	}
	return problems
}

// normalizeEngine checks how tasks run: the engine, Docker's settings, the
// sandbox's isolation and network, and the limits of a task's processes.
func (c *Config) normalizeEngine() (problems []string) {
	if c.Engine == "" {
		c.Engine = DefaultEngine
	}
	if c.Engine != EngineProcess && c.Engine != EngineDocker {
		problems = append(problems, fmt.Sprintf("engine %q must be %s or %s", c.Engine, EngineProcess, EngineDocker))
	}
	if c.Docker.Network != "" && c.Docker.Network != "bridge" && c.Docker.Network != "host" && c.Docker.Network != "none" {
		problems = append(problems, fmt.Sprintf("docker.network %q must be bridge, host or none", c.Docker.Network))
	}
	for _, d := range c.Docker.AllowedDevices {
		if _, ok := dockerDevices[d]; !ok {
			problems = append(problems, fmt.Sprintf("docker.allowedDevices: unknown device %q", d))
		}
	}
	if c.Docker.MemoryMiB < 0 || c.Docker.CPUs < 0 {
		problems = append(problems, "docker.memoryMiB and docker.cpus must not be negative")
	}
	if iso, err := sandbox.ParseIsolation(c.Isolation); err != nil {
		problems = append(problems, err.Error())
	} else {
		c.Isolation = string(iso)
	}
	if n, err := sandbox.ParseNetwork(c.TaskNetwork); err != nil {
		problems = append(problems, err.Error())
	} else {
		c.TaskNetwork = string(n)
	}
	if c.MaxTaskProcesses == 0 {
		c.MaxTaskProcesses = 4096
	}
	if c.MaxTaskMemoryMB < 0 || c.MaxTaskProcesses < 16 && c.MaxTaskProcesses != -1 {
		// The sandbox's init, a Go program, counts against the process
		// limit with its threads.
		problems = append(problems, "maxTaskMemoryMB must not be negative, maxTaskProcesses must be at least 16 (or -1: no limit)")
	}
	return problems
}

// SupersedingEnabled reports whether superseding is on.
func (c *Config) SupersedingEnabled() bool { return boolOr(c.Superseding.Enabled, true) }

func (c *Config) workerCredentials() *tcclient.Credentials {
	return &tcclient.Credentials{
		ClientID: c.Credentials.ClientID, AccessToken: c.Credentials.AccessToken, Certificate: c.Credentials.Certificate,
	}
}

// The defaults Normalize fills in (and `hopper worker --help` shows), each
// written once.
const (
	// DefaultWorkerGroup is the workerGroup of a worker configured without one.
	DefaultWorkerGroup = "local"
	// DefaultCapacity is the number of concurrent runs.
	DefaultCapacity = 1
	// DefaultWorkDir is the work directory, relative to the current one.
	DefaultWorkDir = "hopper-worker"
	// DefaultEngine is how tasks run.
	DefaultEngine = EngineProcess
	// DefaultSupersedingOrder is the order of a superseder's list.
	DefaultSupersedingOrder = "ascending"
)

// HostWorkerID is the workerId a worker configured without one takes:
// this host's name, reduced to a valid workerId.
func HostWorkerID() string { return hostWorkerID() }

// hostWorkerID is the host name reduced to a valid workerId (letters,
// digits, - and _, at most 38 characters).
func hostWorkerID() string {
	name, _ := os.Hostname()
	var b strings.Builder
	for _, r := range name {
		if b.Len() == 38 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == '.':
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "worker"
	}
	return b.String()
}
