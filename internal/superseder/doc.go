// Package superseder holds the rules of the built-in superseder service
// that `hopper serve` answers from its own store (docs/contract/worker.md
// §5), the server side of superseding: which tasks a list names (Select),
// pure Go. Its routes are internal/supersederapi. The worker-side flow, which calls a superseder and claims
// what it lists, is internal/worker/superseding; the two meet only over
// HTTP.
//
// # Built-in superseder
//
// supersederapi.Routes serves, without authentication:
//
//	GET <rootUrl>/api/superseder/v1/list/<age>/<size>/<key>?taskId=<taskId>
//	GET <rootUrl>/api/superseder/v1/list/<key>?taskId=<taskId>
//
// A task opts in with the route coalesce.v1.<key> and the payload
// supersederUrl <rootUrl>/api/superseder/v1/list/<age>/<size>/<key>. <age>
// (seconds) and <size> must be non-negative integers, otherwise 404, like
// the reference service. taskId is required (400 if missing or not a
// taskId, 404 if unknown). The short form uses the server's thresholds
// (default 0 and 0).
//
// The rule: the candidates are the requesting task plus every pending task
// of the requester's task queue whose last run is pending, whose deadline
// has not passed and whose routes include coalesce.v1.<key>. If the
// requester itself lacks that route the answer is empty. The answer is the
// candidates' taskIds, oldest created first (ties by taskId), keeping the
// requester and the newest 31 others (32 in all) — but only when the
// thresholds are exceeded:
//
//	number of candidates > size  AND  now − earliest arrival > age
//
// where a task's arrival is when its current run was queued (for the
// requester, which the worker has already claimed, when that run was
// queued). Otherwise the answer is {"supersedes": []}. With <age> = 0 and
// <size> = 0 superseding happens whenever another same-key task is
// pending; Gecko's reference values 3600 and 5 coalesce only a backlog of
// more than five tasks whose oldest has waited over an hour. Unlike the
// reference service, which learned of pending tasks from Pulse messages and
// forgot a task once it started running, the list is read from the queue's
// own store and always contains the requester, so a worker's own claim
// never makes the answer unusable.
package superseder
