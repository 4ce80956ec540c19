package schema_test

import (
	"errors"
	"fmt"

	"github.com/hopper-ci/hopper/internal/schema"
)

// A claimWork body without "tasks" comes back with the schema default filled
// in, ready to be unmarshalled into the handler's request struct. A body
// whose only gaps are top-level defaults is kept as sent, the defaults
// appended.
func ExampleRegistry_Validate() {
	registry, err := schema.New()
	if err != nil {
		panic(err)
	}
	body, err := registry.Validate("claim-work-request", []byte(`{"workerGroup":"us-east-1","workerId":"i-0abc"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(body))
	// Output: {"workerGroup":"us-east-1","workerId":"i-0abc","tasks":1}
}

// A body that does not match is reported problem by problem, each naming
// the offending place in the body.
func ExampleValidationError() {
	registry, err := schema.New()
	if err != nil {
		panic(err)
	}
	_, err = registry.Validate("claim-work-request", []byte(`{"workerGroup": "us-east-1", "tasks": 100, "capacity": 4}`))
	var verr *schema.ValidationError
	if errors.As(err, &verr) {
		for _, p := range verr.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// (root): additional properties 'capacity' not allowed
	// (root): missing property 'workerId'
	// /tasks: maximum: got 100, want 32
}
