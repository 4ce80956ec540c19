package payload

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

//go:embed docker_schema.json
var dockerSchemaJSON []byte

// Image forms of a docker-worker payload.
const (
	ImageRegistry = "registry"      // a plain string, pulled when missing
	ImageNamed    = "docker-image"  // {type, name}: same, spelled as an object
	ImageIndexed  = "indexed-image" // {type, namespace, path}: artifact of an indexed task
	ImageTask     = "task-image"    // {type, taskId, path}: artifact of a task
)

// DockerPayload is a validated docker-worker payload with defaults applied.
type DockerPayload struct {
	Image         DockerImage               `json:"image"`
	Command       []string                  `json:"command,omitempty"`
	Env           map[string]string         `json:"env,omitempty"`
	MaxRunTime    int                       `json:"maxRunTime"`
	Artifacts     map[string]DockerArtifact `json:"artifacts,omitempty"`
	Cache         map[string]string         `json:"cache,omitempty"`
	Capabilities  DockerCapabilities        `json:"capabilities"`
	OnExitStatus  ExitStatus                `json:"onExitStatus"`
	Log           string                    `json:"log,omitempty"`
	SupersederURL string                    `json:"supersederUrl,omitempty"`
	Features      DockerFeatures            `json:"features"`
	// Interactive (a hopper extension, as in the native payload) says how
	// long an interactive task stays alive after its command.
	Interactive Interactive `json:"interactive"`
}

// DockerImage is payload.image in any of its forms; Type says which.
type DockerImage struct {
	Type      string `json:"type"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	Path      string `json:"path,omitempty"`
}

// UnmarshalJSON accepts the string form as well as the objects.
func (i *DockerImage) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*i = DockerImage{Type: ImageRegistry, Name: s}
		return nil
	}
	type plain DockerImage
	return json.Unmarshal(b, (*plain)(i))
}

// Describe renders the image for the task log.
func (i DockerImage) Describe() string {
	switch i.Type {
	case ImageIndexed:
		return fmt.Sprintf("artifact %s of the task indexed at %s", i.Path, i.Namespace)
	case ImageTask:
		return fmt.Sprintf("artifact %s of task %s", i.Path, i.TaskID)
	}
	return i.Name
}

// DockerArtifact is one entry of payload.artifacts (keyed by name).
type DockerArtifact struct {
	Type    string        `json:"type"`
	Path    string        `json:"path"`
	Expires tcclient.Time `json:"expires,omitzero"`
}

// DockerCapabilities is payload.capabilities.
type DockerCapabilities struct {
	Privileged     bool            `json:"privileged"`
	DisableSeccomp bool            `json:"disableSeccomp"`
	Devices        map[string]bool `json:"devices,omitempty"`
}

// RequestedDevices returns the names of the devices set to true, sorted.
func (c DockerCapabilities) RequestedDevices() []string {
	var out []string
	for name, on := range c.Devices {
		if on {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// DockerFeatures are docker-worker's feature switches after defaults.
type DockerFeatures struct {
	LocalLiveLog     bool `json:"localLiveLog"`
	BulkLog          bool `json:"bulkLog"`
	TaskclusterProxy bool `json:"taskclusterProxy"`
	Artifacts        bool `json:"artifacts"`
	Interactive      bool `json:"interactive"`
	AllowPtrace      bool `json:"allowPtrace"`
	ChainOfTrust     bool `json:"chainOfTrust"`
}

// DockerLogs returns the log artifact names of a docker-worker payload,
// read leniently from raw so that even an invalid payload gets its backing
// log under the name its author expects.
func DockerLogs(raw json.RawMessage) Logs {
	var loose struct {
		Log any `json:"log"`
	}
	live := DefaultLiveLogName
	if json.Unmarshal(raw, &loose) == nil {
		if s, ok := loose.Log.(string); ok && s != "" && printableASCII(s) {
			live = s
		}
	}
	return Logs{Live: live, Backing: BackingLogName(live)}
}

// BackingLogName derives docker-worker's backing log name from the live
// log's: "_backing" goes before the extension of the last path element
// ("public/logs/live.log" → "public/logs/live_backing.log").
func BackingLogName(live string) string {
	dir, base := path.Split(live)
	if i := strings.LastIndex(base, "."); i > 0 {
		return dir + base[:i] + "_backing" + base[i:]
	}
	return live + "_backing"
}

func compileDockerSchema() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(dockerSchemaJSON))
	if err != nil {
		return nil, fmt.Errorf("parsing embedded docker payload schema: %w", err)
	}
	const url = "https://hopper.invalid/schemas/worker/docker-worker-payload.json"
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("adding docker payload schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compiling docker payload schema: %w", err)
	}
	return sch, nil
}

// ParseDocker validates raw as a docker-worker payload and returns it with
// defaults applied, or the problems found, one sentence each, naming where
// in the payload each is.
func (v *Validator) ParseDocker(raw json.RawMessage) (*DockerPayload, []string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, []string{"the task has no payload; a docker-worker payload needs at least \"image\" and \"maxRunTime\""}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, []string{fmt.Sprintf("the payload is not valid JSON: %v", err)}
	}
	obj, _ := doc.(map[string]any)
	if obj != nil {
		if _, ok := obj["image"]; !ok {
			if _, ok := obj["command"].([]any); ok {
				if cmds, _ := obj["command"].([]any); len(cmds) > 0 {
					if _, nested := cmds[0].([]any); nested {
						return nil, []string{"the payload has no \"image\" and its command is a list of commands, i.e. it is a generic-worker payload; " +
							"this worker runs docker-worker payloads (start it with --engine process for generic-worker payloads)"}
					}
				}
			}
		}
		// dind (docker-in-docker) was a docker-worker feature that later
		// schemas dropped; say so rather than "additional property".
		if feats, ok := obj["features"].(map[string]any); ok {
			if _, ok := feats["dind"]; ok {
				return nil, []string{"payload.features.dind: docker-in-docker is not supported by this worker " +
					"(the task container gets no Docker daemon); build images in a task-image producing task instead"}
			}
		}
	}
	if err := v.dockerSchema.Validate(doc); err != nil {
		verr, ok := err.(*jsonschema.ValidationError)
		if !ok {
			return nil, []string{fmt.Sprintf("validating the payload: %v", err)}
		}
		return nil, v.explain(verr)
	}
	var p DockerPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, []string{fmt.Sprintf("the payload does not fit the expected structure: %v", err)}
	}
	feats, _ := obj["features"].(map[string]any)
	def := func(name string, dflt bool, dst *bool) {
		if v, ok := feats[name].(bool); ok {
			*dst = v
			return
		}
		*dst = dflt
	}
	def("localLiveLog", true, &p.Features.LocalLiveLog)
	def("bulkLog", true, &p.Features.BulkLog)
	def("artifacts", true, &p.Features.Artifacts)
	if p.Log == "" {
		p.Log = DefaultLiveLogName
	}
	return &p, nil
}
