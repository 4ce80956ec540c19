package events

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// absent is the routing-key word that stands for a missing optional part,
// and the constant last ("reserved") word of every primary key.
const absent = "_"

// routingKeyKind is the first word of every primary routing key; CC routes
// start with "route." instead, so the two can never collide.
const routingKeyKind = "primary"

// routePrefix prefixes every task route when it is used as a CC routing key.
const routePrefix = "route."

// Word-size limits of Taskcluster's task routing key. The queue validates
// identifiers against tighter schema patterns, so these only trip on a bug.
const (
	maxSlugWord  = 22 // taskId, taskGroupId
	maxRunIDWord = 3  // runId
	maxWord      = 38 // workerGroup, workerId, provisionerId, workerType, schedulerId
)

// TaskKeyParts are the variable words of a task exchange's routing key.
// RunID, WorkerGroup and WorkerID are optional and come from the message body
// (not from the status), so that, say, a task-pending message carries the
// pending run even when the status lists later changes.
type TaskKeyParts struct {
	TaskID        string
	RunID         *int
	WorkerGroup   string
	WorkerID      string
	ProvisionerID string
	WorkerType    string
	SchedulerID   string
	TaskGroupID   string
}

// TaskRoutingKey builds the ten-word routing key of the task exchanges:
//
//	primary.<taskId>.<runId>.<workerGroup>.<workerId>.<provisionerId>.<workerType>.<schedulerId>.<taskGroupId>._
//
// with "_" for an absent runId, workerGroup or workerId. It trusts its input;
// call TaskKeyParts.Validate first when the parts were not validated already.
func TaskRoutingKey(p TaskKeyParts) string {
	runID := absent
	if p.RunID != nil {
		runID = strconv.Itoa(*p.RunID)
	}
	return strings.Join([]string{
		routingKeyKind,
		p.TaskID,
		runID,
		orAbsent(p.WorkerGroup),
		orAbsent(p.WorkerID),
		p.ProvisionerID,
		p.WorkerType,
		p.SchedulerID,
		p.TaskGroupID,
		absent,
	}, ".")
}

// Validate checks the parts the way Taskcluster's publisher does before it
// builds a key: required words present, no word longer than its limit, and
// no word containing a dot (which would shift every later word and make
// consumers' bindings match the wrong tasks).
func (p TaskKeyParts) Validate() error {
	var errs []error
	word := func(name, value string, required bool, limit int) {
		switch {
		case value == "" && required:
			errs = append(errs, fmt.Errorf("routing key word %s is required", name))
		case len(value) > limit:
			errs = append(errs, fmt.Errorf("routing key word %s %q is longer than %d", name, value, limit))
		case strings.Contains(value, "."):
			errs = append(errs, fmt.Errorf("routing key word %s %q contains a dot", name, value))
		}
	}
	word("taskId", p.TaskID, true, maxSlugWord)
	if p.RunID != nil {
		if *p.RunID < 0 || len(strconv.Itoa(*p.RunID)) > maxRunIDWord {
			errs = append(errs, fmt.Errorf("routing key word runId %d is out of range", *p.RunID))
		}
	}
	word("workerGroup", p.WorkerGroup, false, maxWord)
	word("workerId", p.WorkerID, false, maxWord)
	word("provisionerId", p.ProvisionerID, true, maxWord)
	word("workerType", p.WorkerType, true, maxWord)
	word("schedulerId", p.SchedulerID, true, maxWord)
	word("taskGroupId", p.TaskGroupID, true, maxSlugWord)
	return errors.Join(errs...)
}

// GroupRoutingKey builds the routing key of the task-group exchanges:
// primary.<taskGroupId>.<schedulerId>._
func GroupRoutingKey(taskGroupID, schedulerID string) string {
	return routingKeyKind + "." + taskGroupID + "." + schedulerID + "." + absent
}

// validateGroupKey applies TaskKeyParts.Validate's rules to the words of a
// group routing key.
func validateGroupKey(taskGroupID, schedulerID string) error {
	var errs []error
	for _, w := range []struct {
		name, value string
		limit       int
	}{{"taskGroupId", taskGroupID, maxSlugWord}, {"schedulerId", schedulerID, maxWord}} {
		switch {
		case w.value == "":
			errs = append(errs, fmt.Errorf("routing key word %s is required", w.name))
		case len(w.value) > w.limit:
			errs = append(errs, fmt.Errorf("routing key word %s %q is longer than %d", w.name, w.value, w.limit))
		case strings.Contains(w.value, "."):
			errs = append(errs, fmt.Errorf("routing key word %s %q contains a dot", w.name, w.value))
		}
	}
	return errors.Join(errs...)
}

// RouteCCs turns task routes into the CC routing keys their messages are also
// published under: "route.<route>" each, in order. Routes may contain dots;
// consumers bind them with patterns such as "route.index.#". It returns nil
// for no routes.
func RouteCCs(routes []string) []string {
	if len(routes) == 0 {
		return nil
	}
	ccs := make([]string, len(routes))
	for i, r := range routes {
		ccs[i] = routePrefix + r
	}
	return ccs
}

func orAbsent(s string) string {
	if s == "" {
		return absent
	}
	return s
}

// MatchTopic reports whether an AMQP topic-exchange binding pattern matches a
// routing key, with RabbitMQ's semantics: words are separated by dots, "*"
// matches exactly one word and "#" matches zero or more words. The in-process
// bus uses it so that live views can subscribe with the same patterns Pulse
// consumers bind with.
func MatchTopic(pattern, key string) bool {
	pw := strings.Split(pattern, ".")
	kw := strings.Split(key, ".")
	// matched[j] says whether the pattern words consumed so far match the
	// first j key words; each pattern word computes the next row from it.
	matched := make([]bool, len(kw)+1)
	matched[0] = true
	for _, p := range pw {
		next := make([]bool, len(kw)+1)
		switch p {
		case "#":
			// Zero words, or extend any earlier match by one more word.
			next[0] = matched[0]
			for j := 1; j <= len(kw); j++ {
				next[j] = matched[j] || next[j-1]
			}
		case "*":
			for j := 1; j <= len(kw); j++ {
				next[j] = matched[j-1]
			}
		default:
			for j := 1; j <= len(kw); j++ {
				next[j] = matched[j-1] && kw[j-1] == p
			}
		}
		matched = next
	}
	return matched[len(kw)]
}
