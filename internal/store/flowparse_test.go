package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlowParsedOnlyAtCreate: the store calls queue.ParseFlow in CreateTask
// only (for a definition its caller did not parse), never where it reads a
// task: the policy parsed at create is stored with the task (flowColumn)
// and read back from there (storetest's StoredFlowRead checks the reads).
func TestFlowParsedOnlyAtCreate(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var callers []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if ok && sel.Sel.Name == "ParseFlow" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "queue" {
						callers = append(callers, name+":"+fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	require.Equal(t, []string{"create.go:CreateTask"}, callers)
}
