package auth_test

import (
	"fmt"

	"github.com/hopper-ci/hopper/internal/auth"
)

func ExampleTemplate_Render() {
	tmpl := auth.MustParseTemplate(`{"AllOf": [{"for": "name", "in": "names", "each": "queue:get-artifact:<name>"}]}`)
	required, _, err := tmpl.Render(map[string]any{"names": []string{"private/build.log"}})
	if err != nil {
		panic(err)
	}
	held := []string{"queue:get-artifact:public/*"}
	missing, lacking := required.Missing(held)
	fmt.Println(required.SatisfiedBy(held), lacking, missing)
	// Output: false true queue:get-artifact:private/build.log
}

func ExampleExpander_Expand() {
	e, err := auth.NewExpander([]auth.Role{
		{RoleID: "project-admin:*", Scopes: []string{"secrets:get:project/<..>/*", "plain-scope"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Expand([]string{"assume:project-admin:zap"}))
	fmt.Println(e.Expand([]string{"assume:project-admin:ops*"}))
	// Output:
	// [assume:project-admin:zap plain-scope secrets:get:project/zap/*]
	// [assume:project-admin:ops* plain-scope secrets:get:project/ops*]
}
