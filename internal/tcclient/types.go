package tcclient

import "encoding/json"

// Credentials are Taskcluster client credentials. Certificate, when set, is
// the JSON text of a temporary-credential certificate exactly as the issuer
// returned it (the queue returns it as a string inside claims).
type Credentials struct {
	ClientID    string `json:"clientId"`
	AccessToken string `json:"accessToken"`
	Certificate string `json:"certificate,omitempty"`
}

// TaskMetadata is the human-oriented description every task carries.
type TaskMetadata struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Owner       string `json:"owner"`
	Source      string `json:"source"`
}

// TaskDefinition is a task as createTask accepts it and task returns it
// (docs/contract/queue.md §3.1). Optional fields are omitted when empty so that the
// queue applies its defaults; Retries is a pointer because 0 is meaningful.
type TaskDefinition struct {
	TaskQueueID   string            `json:"taskQueueId,omitempty"`
	ProvisionerID string            `json:"provisionerId,omitempty"`
	WorkerType    string            `json:"workerType,omitempty"`
	SchedulerID   string            `json:"schedulerId,omitempty"`
	ProjectID     string            `json:"projectId,omitempty"`
	TaskGroupID   string            `json:"taskGroupId,omitempty"`
	Dependencies  []string          `json:"dependencies,omitempty"`
	Requires      string            `json:"requires,omitempty"`
	Routes        []string          `json:"routes,omitempty"`
	Priority      string            `json:"priority,omitempty"`
	Retries       *int              `json:"retries,omitempty"`
	Created       Time              `json:"created"`
	Deadline      Time              `json:"deadline"`
	Expires       Time              `json:"expires,omitzero"`
	Scopes        []string          `json:"scopes,omitempty"`
	Payload       json.RawMessage   `json:"payload"`
	Metadata      TaskMetadata      `json:"metadata"`
	Tags          map[string]string `json:"tags,omitempty"`
	Extra         json.RawMessage   `json:"extra,omitempty"`
}

// Run states and task states as the queue reports them.
const (
	StateUnscheduled = "unscheduled"
	StatePending     = "pending"
	StateRunning     = "running"
	StateCompleted   = "completed"
	StateFailed      = "failed"
	StateException   = "exception"
)

// Exception reasons a worker may report (docs/contract/queue.md §5.6, plus hopper's
// re-enabled "superseded").
const (
	ReasonWorkerShutdown      = "worker-shutdown"
	ReasonMalformedPayload    = "malformed-payload"
	ReasonResourceUnavailable = "resource-unavailable"
	ReasonInternalError       = "internal-error"
	ReasonIntermittentTask    = "intermittent-task"
	ReasonSuperseded          = "superseded"
)

// Run is one attempt at executing a task (docs/contract/queue.md §4.2).
type Run struct {
	RunID          int    `json:"runId"`
	State          string `json:"state"`
	ReasonCreated  string `json:"reasonCreated"`
	ReasonResolved string `json:"reasonResolved,omitempty"`
	WorkerGroup    string `json:"workerGroup,omitempty"`
	WorkerID       string `json:"workerId,omitempty"`
	TakenUntil     Time   `json:"takenUntil,omitzero"`
	Scheduled      Time   `json:"scheduled"`
	Started        Time   `json:"started,omitzero"`
	Resolved       Time   `json:"resolved,omitzero"`
}

// TaskStatus is the status structure of a task (docs/contract/queue.md §4.1).
type TaskStatus struct {
	TaskID        string `json:"taskId"`
	ProvisionerID string `json:"provisionerId"`
	WorkerType    string `json:"workerType"`
	TaskQueueID   string `json:"taskQueueId"`
	SchedulerID   string `json:"schedulerId"`
	ProjectID     string `json:"projectId,omitempty"`
	TaskGroupID   string `json:"taskGroupId"`
	Priority      string `json:"priority,omitempty"`
	Deadline      Time   `json:"deadline"`
	Expires       Time   `json:"expires"`
	RetriesLeft   int    `json:"retriesLeft"`
	State         string `json:"state"`
	Runs          []Run  `json:"runs"`
}

// StatusResponse wraps a status the way most lifecycle endpoints reply.
type StatusResponse struct {
	Status TaskStatus `json:"status"`
}

// TaskClaim is one element of a claimWork reply and the whole claimTask
// reply: the worker's exclusive hold on a run, plus what it needs to work.
type TaskClaim struct {
	Status      TaskStatus     `json:"status"`
	RunID       int            `json:"runId"`
	WorkerGroup string         `json:"workerGroup"`
	WorkerID    string         `json:"workerId"`
	TakenUntil  Time           `json:"takenUntil"`
	Task        TaskDefinition `json:"task"`
	Credentials Credentials    `json:"credentials"`
}

// TaskReclaim is the reclaimTask reply: like a claim but without the task.
type TaskReclaim struct {
	Status      TaskStatus  `json:"status"`
	RunID       int         `json:"runId"`
	WorkerGroup string      `json:"workerGroup"`
	WorkerID    string      `json:"workerId"`
	TakenUntil  Time        `json:"takenUntil"`
	Credentials Credentials `json:"credentials"`
}

// ClaimWorkRequest is the claimWork body.
type ClaimWorkRequest struct {
	WorkerGroup string `json:"workerGroup"`
	WorkerID    string `json:"workerId"`
	Tasks       int    `json:"tasks"`
}

// ClaimWorkResponse is the claimWork reply.
type ClaimWorkResponse struct {
	Tasks []TaskClaim `json:"tasks"`
}

// ClaimTaskRequest is the claimTask body.
type ClaimTaskRequest struct {
	WorkerGroup string `json:"workerGroup"`
	WorkerID    string `json:"workerId"`
}

// ExceptionRequest is the reportException body.
type ExceptionRequest struct {
	Reason string `json:"reason"`
}

// Artifact storage types.
const (
	StorageS3        = "s3"
	StorageObject    = "object"
	StorageReference = "reference"
	StorageLink      = "link"
	StorageError     = "error"
)

// Error artifact reasons (docs/contract/queue.md §5.7).
const (
	ArtifactFileMissing     = "file-missing-on-worker"
	ArtifactInvalidResource = "invalid-resource-on-worker"
	ArtifactTooLarge        = "too-large-file-on-worker"
	ArtifactNotReadable     = "file-not-readable-on-worker"
)

// CreateArtifactRequest is the createArtifact body; which fields apply
// depends on StorageType (s3/object: ContentType; reference: URL and
// ContentType; link: Artifact; error: Reason and Message).
type CreateArtifactRequest struct {
	StorageType   string `json:"storageType"`
	Expires       Time   `json:"expires"`
	ContentType   string `json:"contentType,omitempty"`
	ContentLength *int64 `json:"contentLength,omitempty"`
	URL           string `json:"url,omitempty"`
	Artifact      string `json:"artifact,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
}

// CreateArtifactResponse is the createArtifact reply. PutURL is set for s3
// artifacts; Raw keeps the whole body for storage types with more fields
// (object artifacts carry upload credentials).
type CreateArtifactResponse struct {
	StorageType string          `json:"storageType"`
	PutURL      string          `json:"putUrl,omitempty"`
	Expires     Time            `json:"expires,omitzero"`
	ContentType string          `json:"contentType,omitempty"`
	Raw         json.RawMessage `json:"-"`
}

// ArtifactRedirect is what getArtifact answers with its 303: where the
// content lives.
type ArtifactRedirect struct {
	StorageType string `json:"storageType"`
	URL         string `json:"url"`
	// Location is the Location header of the reply (normally equal to URL).
	Location string `json:"-"`
}

// Artifact is one entry of listArtifacts.
type Artifact struct {
	StorageType   string `json:"storageType"`
	Name          string `json:"name"`
	Expires       Time   `json:"expires"`
	ContentType   string `json:"contentType"`
	ContentLength *int64 `json:"contentLength,omitempty"`
}

// ListArtifactsResponse is one page of listArtifacts.
type ListArtifactsResponse struct {
	Artifacts         []Artifact `json:"artifacts"`
	ContinuationToken string     `json:"continuationToken,omitempty"`
}

// ListOptions selects a page of a paged method.
type ListOptions struct {
	ContinuationToken string
	Limit             int
}

// TaskGroupMember is one task of listTaskGroup.
type TaskGroupMember struct {
	Status TaskStatus     `json:"status"`
	Task   TaskDefinition `json:"task"`
}

// ListTaskGroupResponse is one page of listTaskGroup.
type ListTaskGroupResponse struct {
	TaskGroupID       string            `json:"taskGroupId"`
	SchedulerID       string            `json:"schedulerId"`
	Expires           Time              `json:"expires"`
	Sealed            Time              `json:"sealed,omitzero"`
	Tasks             []TaskGroupMember `json:"tasks"`
	ContinuationToken string            `json:"continuationToken,omitempty"`
}

// TaskQueueCountsResponse is the taskQueueCounts reply.
type TaskQueueCountsResponse struct {
	ProvisionerID string `json:"provisionerId"`
	WorkerType    string `json:"workerType"`
	TaskQueueID   string `json:"taskQueueId"`
	PendingTasks  int    `json:"pendingTasks"`
	ClaimedTasks  int    `json:"claimedTasks"`
}
