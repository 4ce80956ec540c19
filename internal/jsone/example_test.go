package jsone_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/jsone"
)

func ExampleRenderAt() {
	var template any
	_ = json.Unmarshal([]byte(`{
		"taskGroupId": "${taskId}",
		"created": {"$fromNow": ""},
		"deadline": {"$fromNow": "1 day"},
		"payload": {"$merge": [
			{"command": {"$map": {"$eval": "range(1, 4)"}, "each(n)": "echo ${n * 10}"}},
			{"$if": "firedBy == 'schedule'", "then": {"nightly": true}}
		]}
	}`), &template)
	context := map[string]any{"taskId": "fXa8Ye1eTs2hm4mC6Ms4Sg", "firedBy": "triggerHook"}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

	task, err := jsone.RenderAt(template, context, now)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := json.MarshalIndent(task, "", "  ")
	fmt.Println(string(out))

	_, err = jsone.RenderAt(map[string]any{"image": "${imgae}"}, context, now)
	fmt.Println(err)
	// Output:
	// {
	//   "created": "2026-11-24T12:00:00.000Z",
	//   "deadline": "2026-11-25T12:00:00.000Z",
	//   "payload": {
	//     "command": [
	//       "echo 10",
	//       "echo 20",
	//       "echo 30"
	//     ]
	//   },
	//   "taskGroupId": "fXa8Ye1eTs2hm4mC6Ms4Sg"
	// }
	// InterpreterError at template.image: unknown context value imgae
}
