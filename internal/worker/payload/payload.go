// Package payload parses and validates task payloads in generic-worker's
// native posix format (docs/contract/worker.md §2) against an embedded JSON schema, and
// explains validation failures in sentences a task author can act on.
package payload

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

//go:embed schema.json
var schemaJSON []byte

// Default artifact names of the two task logs.
const (
	DefaultLiveLogName    = "public/logs/live.log"
	DefaultBackingLogName = "public/logs/live_backing.log"
)

// Payload is a validated payload with defaults applied.
type Payload struct {
	Command    [][]string        `json:"command"`
	Env        map[string]string `json:"env,omitempty"`
	MaxRunTime int               `json:"maxRunTime"`
	// Limits (a hopper extension) asks for tighter resource limits than
	// the worker's own.
	Limits Limits `json:"limits"`
	// Interactive (a hopper extension) says how long an interactive task
	// stays alive after its commands.
	Interactive  Interactive `json:"interactive"`
	Artifacts    []Artifact  `json:"artifacts,omitempty"`
	Mounts       []Mount     `json:"mounts,omitempty"`
	Features     Features    `json:"features"`
	OnExitStatus ExitStatus  `json:"onExitStatus"`
	Logs         Logs        `json:"logs"`
	OSGroups     []string    `json:"osGroups,omitempty"`
	// SupersederURL is the superseding service URL (empty if none).
	SupersederURL             string `json:"supersederUrl,omitempty"`
	TaskclusterProxyInterface string `json:"taskclusterProxyInterface,omitempty"`
}

// Artifact is one entry of payload.artifacts.
type Artifact struct {
	Type            string        `json:"type"`
	Path            string        `json:"path"`
	Name            string        `json:"name,omitempty"`
	Expires         tcclient.Time `json:"expires,omitzero"`
	ContentType     string        `json:"contentType,omitempty"`
	ContentEncoding string        `json:"contentEncoding,omitempty"`
	Optional        bool          `json:"optional,omitempty"`
}

// Interactive is payload.interactive.
type Interactive struct {
	// KeepAlive is in seconds; nil means interactive.DefaultKeepAlive.
	KeepAlive *int `json:"keepAlive,omitempty"`
}

// Limits is payload.limits; zero fields mean the worker's limit.
type Limits struct {
	MemoryMB     int `json:"memoryMB,omitempty"`
	MaxProcesses int `json:"maxProcesses,omitempty"`
}

// Features are the payload's feature switches after defaults.
type Features struct {
	BackingLog       bool `json:"backingLog"`
	LiveLog          bool `json:"liveLog"`
	TaskclusterProxy bool `json:"taskclusterProxy"`
	ResourceMonitor  bool `json:"resourceMonitor"`
	Interactive      bool `json:"interactive"`
	LoopbackVideo    bool `json:"loopbackVideo"`
	LoopbackAudio    bool `json:"loopbackAudio"`
}

// ExitStatus is payload.onExitStatus.
type ExitStatus struct {
	Retry       []int `json:"retry,omitempty"`
	PurgeCaches []int `json:"purgeCaches,omitempty"`
}

// Logs names the log artifacts.
type Logs struct {
	Live    string `json:"live"`
	Backing string `json:"backing"`
}

// Mount kinds.
const (
	MountFile      = "file"
	MountDirectory = "directory"
	MountCache     = "cache"
)

// Mount is one entry of payload.mounts; Kind tells which of the three forms
// it has (the schema decides it by the keys present).
type Mount struct {
	Kind      string   `json:"-"`
	File      string   `json:"file,omitempty"`
	Directory string   `json:"directory,omitempty"`
	CacheName string   `json:"cacheName,omitempty"`
	Content   *Content `json:"content,omitempty"`
	Format    string   `json:"format,omitempty"`
}

// Content is where mount bytes come from; exactly one form is set.
type Content struct {
	TaskID    string  `json:"taskId,omitempty"`
	Artifact  string  `json:"artifact,omitempty"`
	Namespace string  `json:"namespace,omitempty"`
	URL       string  `json:"url,omitempty"`
	SHA256    string  `json:"sha256,omitempty"`
	Raw       *string `json:"raw,omitempty"`
	Base64    *string `json:"base64,omitempty"`
}

// Describe returns a short human description of the content source.
func (c *Content) Describe() string {
	switch {
	case c.Raw != nil:
		return "raw content"
	case c.Base64 != nil:
		return "base64 content"
	case c.URL != "":
		return "url " + c.URL
	case c.Namespace != "":
		return fmt.Sprintf("artifact %s of indexed task %s", c.Artifact, c.Namespace)
	default:
		return fmt.Sprintf("artifact %s of task %s", c.Artifact, c.TaskID)
	}
}

// Validator validates payloads; build one with NewValidator and reuse it
// (it is safe for concurrent use).
type Validator struct {
	schema       *jsonschema.Schema
	dockerSchema *jsonschema.Schema
	printer      *message.Printer
}

// NewValidator compiles the embedded schema.
func NewValidator() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("parsing embedded payload schema: %w", err)
	}
	const url = "https://hopper.invalid/schemas/worker/insecure-posix-payload.json"
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("adding payload schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compiling payload schema: %w", err)
	}
	dsch, err := compileDockerSchema()
	if err != nil {
		return nil, err
	}
	return &Validator{schema: sch, dockerSchema: dsch, printer: message.NewPrinter(language.English)}, nil
}

// Parse validates raw and returns the payload with defaults applied. When
// the payload is invalid it returns nil and one explanation per problem,
// each naming where in the payload the problem is; those sentences are meant
// for the task log.
func (v *Validator) Parse(raw json.RawMessage) (*Payload, []string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, []string{"the task has no payload; a payload object with at least \"command\" and \"maxRunTime\" is required"}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, []string{fmt.Sprintf("the payload is not valid JSON: %v", err)}
	}
	if obj, ok := doc.(map[string]any); ok {
		if _, ok := obj["image"]; ok {
			return nil, []string{"the payload has an \"image\" property, i.e. it is a docker-worker payload; " +
				"this worker runs only native generic-worker payloads (docker-worker translation is not supported)"}
		}
	}
	if err := v.schema.Validate(doc); err != nil {
		verr, ok := err.(*jsonschema.ValidationError)
		if !ok {
			return nil, []string{fmt.Sprintf("validating the payload: %v", err)}
		}
		return nil, v.explain(verr)
	}
	var p Payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, []string{fmt.Sprintf("the payload does not fit the expected structure: %v", err)}
	}
	p.applyDefaults(doc.(map[string]any))
	return &p, nil
}

func (p *Payload) applyDefaults(doc map[string]any) {
	feats, _ := doc["features"].(map[string]any)
	def := func(name string, dflt bool, dst *bool) {
		if v, ok := feats[name].(bool); ok {
			*dst = v
			return
		}
		*dst = dflt
	}
	def("backingLog", true, &p.Features.BackingLog)
	def("liveLog", true, &p.Features.LiveLog)
	def("resourceMonitor", true, &p.Features.ResourceMonitor)
	if p.Logs.Live == "" {
		p.Logs.Live = DefaultLiveLogName
	}
	if p.Logs.Backing == "" {
		p.Logs.Backing = DefaultBackingLogName
	}
	if p.TaskclusterProxyInterface == "" {
		p.TaskclusterProxyInterface = "localhost"
	}
	for i := range p.Mounts {
		m := &p.Mounts[i]
		switch {
		case m.CacheName != "":
			m.Kind = MountCache
		case m.Directory != "":
			m.Kind = MountDirectory
		default:
			m.Kind = MountFile
		}
	}
	for i := range p.Artifacts {
		a := &p.Artifacts[i]
		if a.Name == "" {
			a.Name = strings.ReplaceAll(a.Path, "\\", "/")
		}
	}
}

// DefaultLogsOnly returns the log settings a payload would get from
// defaults; used when the payload is invalid but a backing log is still
// written (docs/contract/worker.md §2: defaults are applied before validation). It reads
// "logs" and "features.backingLog" leniently from raw.
func DefaultLogsOnly(raw json.RawMessage) (logs Logs, backingLog bool) {
	logs = Logs{Live: DefaultLiveLogName, Backing: DefaultBackingLogName}
	backingLog = true
	var loose struct {
		Logs     map[string]any `json:"logs"`
		Features map[string]any `json:"features"`
	}
	if json.Unmarshal(raw, &loose) != nil {
		return logs, backingLog
	}
	if s, ok := loose.Logs["backing"].(string); ok && s != "" && printableASCII(s) {
		logs.Backing = s
	}
	if s, ok := loose.Logs["live"].(string); ok && s != "" && printableASCII(s) {
		logs.Live = s
	}
	if b, ok := loose.Features["backingLog"].(bool); ok {
		backingLog = b
	}
	return logs, backingLog
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// explain flattens a validation error tree into one sentence per leaf
// problem, sorted and de-duplicated so the log reads the same every time.
func (v *Validator) explain(verr *jsonschema.ValidationError) []string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		out = append(out, fmt.Sprintf("%s: %s", location(e.InstanceLocation), e.ErrorKind.LocalizedString(v.printer)))
	}
	walk(verr)
	sort.Strings(out)
	return slices.Compact(out)
}

// location renders an instance location like "payload.artifacts[0].path".
func location(tokens []string) string {
	var b strings.Builder
	b.WriteString("payload")
	for _, t := range tokens {
		if isIndex(t) {
			fmt.Fprintf(&b, "[%s]", t)
			continue
		}
		b.WriteString(".")
		b.WriteString(t)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
