package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/hopper-ci/hopper/internal/worker/payload"
)

// maxPayloadWarnings bounds the problems a warning lists; the worker's
// task log has them all.
const maxPayloadWarnings = 10

// payloadProblems checks a task's payload against the schema hopper's
// worker applies when it claims the task (docker-worker's when the
// payload names an image, generic-worker's otherwise), so that a payload
// it would resolve exception/malformed-payload is caught at create time.
// The queue itself accepts any payload: another worker may take others.
func payloadProblems(doc map[string]any) []string {
	raw, err := json.Marshal(doc["payload"])
	if err != nil || doc["payload"] == nil {
		raw = nil
	}
	v, err := payload.NewValidator()
	if err != nil {
		return nil // the embedded schemas are checked by the worker's tests
	}
	if obj, ok := doc["payload"].(map[string]any); ok {
		if _, docker := obj["image"]; docker {
			_, problems := v.ParseDocker(raw)
			return problems
		}
	}
	_, problems := v.Parse(raw)
	return problems
}

// warnPayload prints payloadProblems, if any, as a warning; which names
// the task when a file holds several.
func warnPayload(w io.Writer, doc map[string]any, which string) {
	problems := payloadProblems(doc)
	if len(problems) == 0 {
		return
	}
	queue, _ := doc["taskQueueId"].(string)
	fmt.Fprintf(w, "warning: %shopper's worker would refuse this payload (the task would end exception/malformed-payload); "+
		"ignore this if another kind of worker serves %s:\n", which, queue)
	for i, p := range problems {
		if i == maxPayloadWarnings {
			fmt.Fprintf(w, "  … and %d more\n", len(problems)-i)
			break
		}
		fmt.Fprintf(w, "  - %s\n", p)
	}
}
