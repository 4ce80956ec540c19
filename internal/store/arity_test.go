package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreMethodsTakeAtMostThreeArguments holds the store's argument rule
// (docs/ARCHITECTURE.md, "Adding a service"): every method of a store
// interface takes the context and at most three more arguments; more go
// in a <Method>Params struct.
func TestStoreMethodsTakeAtMostThreeArguments(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok || !strings.HasSuffix(spec.Name.Name, "Store") {
				return true
			}
			iface, ok := spec.Type.(*ast.InterfaceType)
			if !ok {
				return true
			}
			for _, m := range iface.Methods.List {
				fn, ok := m.Type.(*ast.FuncType)
				if !ok || len(m.Names) == 0 {
					continue
				}
				args := 0
				for _, p := range fn.Params.List {
					args += max(len(p.Names), 1)
				}
				if args > 4 {
					t.Errorf("%s: %s.%s takes the context and %d more arguments; put them in a %sParams struct",
						fset.Position(m.Pos()), spec.Name.Name, m.Names[0].Name, args-1, m.Names[0].Name)
				}
			}
			return true
		})
	}
}
