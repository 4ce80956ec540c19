package queueapi

import (
	"net/http"

	"github.com/hopper-ci/hopper/internal/api"
)

// BasePath is where the Queue API lives below the root URL.
const BasePath = "/api/queue/v1"

const queueBase = BasePath

// createTaskScopes is what createTask requires, whoever calls it (see
// CreateTaskAs).
var createTaskScopes = api.AllOf(
	api.ForEach("scope", "scopes", "<scope>"),
	api.ForEach("route", "routes", "queue:route:<route>"),
	api.Scope("queue:create-task:project:<projectId>"),
	api.Scope("queue:scheduler-id:<schedulerId>"),
	api.AnyOf(api.ForEach("priority", "priorities", "queue:create-task:<priority>:<provisionerId>/<workerType>")),
)

// queueRoutes is the Queue API v1 (docs/contract/queue.md §5.1), except artifacts,
// which artifacts.go adds.
func (s *Server) queueRoutes() []api.Route {
	q := func(paths ...string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = queueBase + p
		}
		return out
	}
	paged := []string{"continuationToken", "limit"}
	schedulerScopes := transitionScopes
	routes := append(api.ServiceHealthRoutes(queueBase, s.started, s.cfg.Version), []api.Route{
		{Name: "task", Method: http.MethodGet, Paths: q("/task/{taskId}"), Scopes: api.Scope("queue:get-task:<taskId>"), EarlyScopes: true, Handle: s.getTask},
		{Name: "status", Method: http.MethodGet, Paths: q("/task/{taskId}/status"), Scopes: api.Scope("queue:status:<taskId>"), EarlyScopes: true, Handle: s.getStatus},
		{Name: "tasks", Method: http.MethodPost, Paths: q("/tasks"), Input: "task-ids-request", Query: paged,
			Scopes: api.AllOf(api.ForEach("taskId", "taskIds", "queue:get-task:<taskId>")), Handle: s.getTasks},
		{Name: "statuses", Method: http.MethodPost, Paths: q("/tasks/status"), Input: "task-ids-request", Query: paged,
			Scopes: api.AllOf(api.ForEach("taskId", "taskIds", "queue:status:<taskId>")), Handle: s.getStatuses},
		{Name: "listTaskGroup", Method: http.MethodGet, Paths: q("/task-group/{taskGroupId}/list"), Query: paged,
			Scopes: api.Scope("queue:list-task-group:<taskGroupId>"), EarlyScopes: true, Handle: s.listTaskGroup},
		{Name: "getTaskGroup", Method: http.MethodGet, Paths: q("/task-group/{taskGroupId}"),
			Scopes: api.Scope("queue:list-task-group:<taskGroupId>"), EarlyScopes: true, Handle: s.getTaskGroup},
		{Name: "sealTaskGroup", Method: http.MethodPost, Paths: q("/task-group/{taskGroupId}/seal"),
			Scopes: api.Scope("queue:seal-task-group:<schedulerId>/<taskGroupId>"), Handle: s.sealTaskGroup},
		{Name: "cancelTaskGroup", Method: http.MethodPost, Paths: q("/task-group/{taskGroupId}/cancel"),
			Scopes: api.Scope("queue:cancel-task-group:<schedulerId>/<taskGroupId>"), Handle: s.cancelTaskGroup},
		{Name: "listDependentTasks", Method: http.MethodGet, Paths: q("/task/{taskId}/dependents"), Query: paged,
			Scopes: api.Scope("queue:list-dependent-tasks:<taskId>"), EarlyScopes: true, Handle: s.listDependentTasks},

		{Name: "createTask", Method: http.MethodPut, Paths: q("/task/{taskId}"), Input: "create-task-request", KeepsNUL: true,
			Scopes: createTaskScopes, Handle: s.createTask},
		{Name: "scheduleTask", Method: http.MethodPost, Paths: q("/task/{taskId}/schedule"), Scopes: schedulerScopes("schedule-task"), Handle: s.scheduleTask},
		{Name: "rerunTask", Method: http.MethodPost, Paths: q("/task/{taskId}/rerun"), Scopes: schedulerScopes("rerun-task"), Handle: s.rerunTask},
		{Name: "cancelTask", Method: http.MethodPost, Paths: q("/task/{taskId}/cancel"), Scopes: schedulerScopes("cancel-task"), Handle: s.cancelTask},

		{Name: "claimWork", Method: http.MethodPost, Paths: q("/claim-work/{taskQueueId}", "/claim-work/{tqProvisioner}/{tqWorkerType}"),
			Input: "claim-work-request", InputRepeats: true,
			Scopes: api.AllOf(api.Scope("queue:claim-work:<taskQueueId>"), api.Scope("queue:worker-id:<workerGroup>/<workerId>")), Handle: s.claimWork},
		{Name: "claimTask", Method: http.MethodPost, Paths: q("/task/{taskId}/runs/{runId}/claim"), Input: "claim-task-request",
			// hopper also accepts the claim-work scope of the task's queue, so
			// superseding workers need nothing beyond their usual scopes
			// (docs/contract/queue.md §10 item 8).
			Scopes: api.AllOf(
				api.AnyOf(api.Scope("queue:claim-task:<provisionerId>/<workerType>"), api.Scope("queue:claim-work:<provisionerId>/<workerType>")),
				api.Scope("queue:worker-id:<workerGroup>/<workerId>")), Handle: s.claimTask},
		{Name: "reclaimTask", Method: http.MethodPost, Paths: q("/task/{taskId}/runs/{runId}/reclaim"),
			Scopes: api.Scope("queue:reclaim-task:<taskId>/<runId>"), EarlyScopes: true, Handle: s.reclaimTask},
		{Name: "reportCompleted", Method: http.MethodPost, Paths: q("/task/{taskId}/runs/{runId}/completed"),
			Scopes: api.Scope("queue:resolve-task:<taskId>/<runId>"), EarlyScopes: true, Handle: s.reportCompleted},
		{Name: "reportFailed", Method: http.MethodPost, Paths: q("/task/{taskId}/runs/{runId}/failed"),
			Scopes: api.Scope("queue:resolve-task:<taskId>/<runId>"), EarlyScopes: true, Handle: s.reportFailed},
		{Name: "reportException", Method: http.MethodPost, Paths: q("/task/{taskId}/runs/{runId}/exception"), Input: "task-exception-request",
			Scopes: api.Scope("queue:resolve-task:<taskId>/<runId>"), EarlyScopes: true, Handle: s.reportException},

		{Name: "pendingTasks", Method: http.MethodGet, Paths: q("/pending/{taskQueueId}", "/pending/{tqProvisioner}/{tqWorkerType}"),
			Scopes: api.Scope("queue:pending-count:<taskQueueId>"), EarlyScopes: true, Handle: s.pendingTasks},
		{Name: "taskQueueCounts", Method: http.MethodGet, Paths: q("/task-queues/{taskQueueId}/counts", "/task-queues/{tqProvisioner}/{tqWorkerType}/counts"),
			Scopes: api.AllOf(api.Scope("queue:pending-count:<taskQueueId>"), api.Scope("queue:claimed-count:<taskQueueId>")), EarlyScopes: true, Handle: s.taskQueueCounts},
		{Name: "listPendingTasks", Method: http.MethodGet, Paths: q("/task-queues/{taskQueueId}/pending", "/task-queues/{tqProvisioner}/{tqWorkerType}/pending"), Query: paged,
			Scopes: api.Scope("queue:pending-list:<taskQueueId>"), EarlyScopes: true, Handle: s.listPendingTasks},
		{Name: "listClaimedTasks", Method: http.MethodGet, Paths: q("/task-queues/{taskQueueId}/claimed", "/task-queues/{tqProvisioner}/{tqWorkerType}/claimed"), Query: paged,
			Scopes: api.Scope("queue:claimed-list:<taskQueueId>"), EarlyScopes: true, Handle: s.listClaimedTasks},
		{Name: "listTaskQueues", Method: http.MethodGet, Paths: q("/task-queues"), Query: paged,
			Scopes: api.Scope("queue:list-task-queues"), EarlyScopes: true, Handle: s.listTaskQueues},
		{Name: "getTaskQueue", Method: http.MethodGet, Paths: q("/task-queues/{taskQueueId}", "/task-queues/{tqProvisioner}/{tqWorkerType}"),
			Scopes: api.Scope("queue:get-task-queue:<taskQueueId>"), EarlyScopes: true, Handle: s.getTaskQueue},

		{Name: "listProvisioners", Method: http.MethodGet, Paths: q("/provisioners"), Query: paged,
			Scopes: api.Scope("queue:list-provisioners"), EarlyScopes: true, Handle: s.listProvisioners},
		{Name: "getProvisioner", Method: http.MethodGet, Paths: q("/provisioners/{provisionerId}"),
			Scopes: api.Scope("queue:get-provisioner:<provisionerId>"), EarlyScopes: true, Handle: s.getProvisioner},
		{Name: "declareProvisioner", Method: http.MethodPut, Paths: q("/provisioners/{provisionerId}"), Input: "declare-provisioner-request",
			Scopes: api.AllOf(api.ForEach("property", "properties", "queue:declare-provisioner:<provisionerId>#<property>")), Handle: s.declareProvisioner},
		{Name: "listWorkerTypes", Method: http.MethodGet, Paths: q("/provisioners/{provisionerId}/worker-types"), Query: paged,
			Scopes: api.Scope("queue:list-worker-types:<provisionerId>"), EarlyScopes: true, Handle: s.listWorkerTypes},
		{Name: "getWorkerType", Method: http.MethodGet, Paths: q("/provisioners/{provisionerId}/worker-types/{workerType}"),
			Scopes: api.Scope("queue:get-worker-type:<provisionerId>/<workerType>"), EarlyScopes: true, Handle: s.getWorkerType},
		{Name: "declareWorkerType", Method: http.MethodPut, Paths: q("/provisioners/{provisionerId}/worker-types/{workerType}"), Input: "declare-worker-type-request",
			Scopes: api.AllOf(api.ForEach("property", "properties", "queue:declare-worker-type:<provisionerId>/<workerType>#<property>")), Handle: s.declareWorkerType},
		{Name: "listWorkers", Method: http.MethodGet, Paths: q("/provisioners/{provisionerId}/worker-types/{workerType}/workers"),
			Query:  []string{"continuationToken", "limit", "quarantined"},
			Scopes: api.Scope("queue:list-workers:<provisionerId>/<workerType>"), EarlyScopes: true, Handle: s.listWorkers},
		{Name: "getWorker", Method: http.MethodGet, Paths: q("/provisioners/{provisionerId}/worker-types/{workerType}/workers/{workerGroup}/{workerId}"),
			Scopes: api.Scope("queue:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>"), EarlyScopes: true, Handle: s.getWorker},
		{Name: "quarantineWorker", Method: http.MethodPut, Paths: q("/provisioners/{provisionerId}/worker-types/{workerType}/workers/{workerGroup}/{workerId}"),
			Input:  "quarantine-worker-request",
			Scopes: api.Scope("queue:quarantine-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>"), EarlyScopes: true, Handle: s.quarantineWorker},
		{Name: "declareWorker", Method: http.MethodPut, Paths: q("/provisioners/{provisionerId}/worker-types/{workerType}/{workerGroup}/{workerId}"),
			Input:  "declare-worker-request",
			Scopes: api.AllOf(api.ForEach("property", "properties", "queue:declare-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>#<property>")), Handle: s.declareWorker},
	}...)
	return routes
}
