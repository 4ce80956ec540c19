package github

// Build states, as Taskcluster's builds list them and statuses carry
// them (cancelled shows as error on the forge).
const (
	StatePending   = "pending"
	StateSuccess   = "success"
	StateFailure   = "failure"
	StateError     = "error"
	StateCancelled = "cancelled"
)

// The states of a task that decide its build's (the queue's
// queue.StateCompleted, …, as Taskcluster names them).
const (
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskException = "exception"
)

// GroupState is a build's state from its task group's tasks: any failed
// or exception task makes it failure; otherwise any unresolved task keeps
// it pending; otherwise it is success. An empty group is pending (its
// tasks are still being created).
func GroupState[T interface{ State() string }](tasks []T) string {
	if len(tasks) == 0 {
		return StatePending
	}
	pending := false
	for _, t := range tasks {
		switch t.State() {
		case taskFailed, taskException:
			return StateFailure
		case taskCompleted:
		default:
			pending = true
		}
	}
	if pending {
		return StatePending
	}
	return StateSuccess
}

// ForgeState is the commit-status state a build state is reported as.
func ForgeState(state string) string {
	if state == StateCancelled {
		return StateError
	}
	return state
}

// StatusContext is the commit status context of a build: the
// application's name and the event type before its dot, as Taskcluster
// names it ("Taskcluster (push)", "Taskcluster (pull_request)").
func StatusContext(appName, eventType string) string {
	kind := eventType
	for i := 0; i < len(kind); i++ {
		if kind[i] == '.' {
			kind = kind[:i]
			break
		}
	}
	return appName + " (" + kind + ")"
}

// StatusDescription is the description a build's status carries.
func StatusDescription(state, eventType string) string {
	switch state {
	case StatePending:
		return "TaskGroup: Pending (for " + eventType + ")"
	case StateSuccess:
		return "TaskGroup: Success"
	case StateCancelled:
		return "TaskGroup: Cancelled"
	}
	return "TaskGroup: Failure"
}

// stateRank orders build states: a build only moves up. A late pending
// (a replica that listed the group before a task failed) never replaces
// failure, and cancelled is final.
var stateRank = map[string]int{StatePending: 0, StateSuccess: 1, StateFailure: 2, StateError: 2, StateCancelled: 3}

// Advances reports whether a build in state from may move to state to.
func Advances(from, to string) bool {
	return stateRank[to] > stateRank[from]
}
