// Package superseding is the worker side of superseding (docs/contract/worker.md §5): it
// lets one run stand in for a backlog of equivalent tasks. It talks to the
// queue and to the superseder only over HTTP (tcclient), so it works
// against any Taskcluster deployment; hopper's own superseder service is
// internal/superseder.
//
// The worker runs the step (Step.Run) for every claim it gets; this
// package knows the worker only through the Host and Claim interfaces,
// so the dependency points one way (worker → superseding). For
// a claimed task T0 whose payload has a supersederUrl (and superseding is
// enabled) it:
//
//  1. checks the URL (absolute http(s), superseding.allowedUrlPrefixes, also
//     applied to redirects) and calls it once: GET with taskId=<T0> merged
//     into the query, no credentials, Accept: application/json, at most 3
//     redirects, superseding.timeout for the whole exchange, at most 1 MiB
//     read;
//  2. accepts only a 200 JSON object whose "supersedes" is an array of
//     distinct taskIds containing T0 and at most superseding.maxTasks long;
//     anything else runs T0 alone with a warning in T0's log saying why.
//     [] and [T0] mean "nothing to supersede";
//  3. with superseding.order descending (seed 000, docker-worker) reverses
//     the list, so everything below works on ascending lists (seed 001:
//     each task supersedes those earlier in the list);
//  4. claims every other entry with the worker's credentials, at most 8 at a
//     time: reads the task and skips it unless it is in the worker's task
//     queue and names the same supersederUrl, reads its status and claims
//     its last run if that is pending (only if that is run 0 with
//     superseding.runIdZeroOnly); every failure only skips the entry. Each
//     claim gets its own reclaimer the moment it is held;
//  5. makes the highest-indexed held entry the primary P and every other held
//     entry a secondary; P runs exactly as if claimWork had returned it;
//  6. once P's outcome is known and its artifacts and logs are uploaded,
//     stops the secondaries' reclaimers and, if P's task code ran to a
//     conclusion (completed, failed by exit code or missing artifact,
//     intermittent-task), resolves each live secondary exception/superseded
//     and then creates its public/superseded-by.json
//     ({"taskId": P, "runId": r}); P gets public/supersedes.json listing, in
//     list order, the secondaries for which both calls succeeded, before P
//     is resolved. For any other outcome — P aborted, in exception, lost, or
//     the worker shutting down — the secondaries are resolved
//     exception/worker-shutdown so the queue retries them at once. A
//     secondary whose claim was lost meanwhile is dropped silently.
//
// Both artifacts are s3 artifacts of Content-Type application/json that
// expire with their task. exception/superseded is final (never retried), so
// dependents of a superseded task that require all-completed never become
// pending and eventually hit their deadline: only let tasks opt in whose
// dependents accept all-resolved.
package superseding
