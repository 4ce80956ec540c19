package e2e_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// moduleImports maps every package of the module (relative to it:
// "internal/store") to the module's packages it imports outside its
// tests.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	root := e2e.RepoRoot()
	out := map[string][]string{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			if _, none := err.(*build.NoGoError); none {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		imports := []string{}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, modulePath) {
				imports = append(imports, strings.TrimPrefix(imp, modulePath))
			}
		}
		out[filepath.ToSlash(rel)] = imports
		return nil
	}))
	require.Greater(t, len(out), 50, "the walk found the module's packages")
	return out
}

// tier places a package in the layers docs/ARCHITECTURE.md draws, lowest
// first: 0 the leaves, the services' rules and the client side; 1 the
// store; 2 what is built directly on it (its drivers and conformance
// suite, the HTTP framework, the replicas' directory internal/hop); 3 the
// services (routes, duties, the schedule of duties); 4 the composition
// root; 5 what assembles a whole server and worker or drives one from
// outside; 6 the binary.
func tier(pkg string) int {
	switch pkg {
	case "cmd/hopper":
		return 6
	case "internal/devmode", "internal/bench", "internal/e2e", "internal/apitest", "internal/worker/workere2e":
		return 5
	case "internal/server":
		return 4
	case "internal/maintenance", "internal/notifysend", "internal/workerpool", "internal/object", "internal/live", "internal/tunnel", "internal/ui":
		return 3
	case "internal/api", "internal/hop", "internal/store/sqlite", "internal/store/postgres", "internal/store/storetest":
		return 2
	case "internal/store":
		return 1
	}
	if isServiceRoutes(pkg) {
		return 3
	}
	return 0
}

// isServiceRoutes says whether pkg is a service's routes package
// (internal/<service>api); the framework and the Docker client are not.
func isServiceRoutes(pkg string) bool {
	name, ok := strings.CutPrefix(pkg, "internal/")
	return ok && !strings.Contains(name, "/") && strings.HasSuffix(name, "api") && name != "api" && name != "dockerapi"
}

// upwardImports lists the imports that run back up: to a package of the
// importer's tier or above, but for the leaves and rules among
// themselves and a service's routes importing the service's own package
// (objectapi → object).
func upwardImports(imports map[string][]string) []string {
	var up []string
	for pkg, deps := range imports {
		for _, dep := range deps {
			ti, td := tier(pkg), tier(dep)
			if td < ti || (ti == 0 && td == 0) || (ti == 3 && strings.TrimSuffix(pkg, "api") == dep) {
				continue
			}
			up = append(up, pkg+" → "+dep)
		}
	}
	sort.Strings(up)
	return up
}

// TestNoImportRunsBackUp holds the layers: no package imports one of its
// own tier or above (the store's conformance suite once imported the
// maintenance duties; the purge-cache rules the store).
func TestNoImportRunsBackUp(t *testing.T) {
	t.Parallel()
	assert.Empty(t, upwardImports(moduleImports(t)))
}

// TestClientSideImportsNoServerSide holds the HTTP line from the client's
// side: whatever the worker, the CLI and the Go client build on, however
// indirectly, is theirs or a leaf both sides share.
func TestClientSideImportsNoServerSide(t *testing.T) {
	t.Parallel()
	imports := moduleImports(t)
	shared := map[string]bool{}
	for _, p := range []string{"hawk", "ident", "retry", "clock", "dockerapi", "jsone", "schema", "jsvalue", "interactive", "github", "buildinfo", "wsmux"} {
		shared["internal/"+p] = true
	}
	isClient := func(p string) bool {
		return p == "internal/tcclient" || strings.HasPrefix(p, "internal/tcclient/") || p == "internal/cli" ||
			p == "internal/worker" || strings.HasPrefix(p, "internal/worker/")
	}
	for pkg := range imports {
		if !isClient(pkg) {
			continue
		}
		seen := map[string]bool{}
		var walk func(p string)
		walk = func(p string) {
			for _, dep := range imports[p] {
				if seen[dep] {
					continue
				}
				seen[dep] = true
				assert.True(t, isClient(dep) || shared[dep], "%s depends on %s (through %s), which is neither client side nor a shared leaf", pkg, dep, p)
				walk(dep)
			}
		}
		walk(pkg)
	}
}

// TestSharedPackagesImportNoService: the framework names no service (a
// service's rules reach it through interfaces, api.CodedError), and
// maintenance only schedules duties: each service's duty is its own
// code, which the composition root hands to maintenance.Every, so
// maintenance imports neither a service's rules nor its messaging
// (internal/events: the hooks' Pulse listener lives in hooksapi).
func TestSharedPackagesImportNoService(t *testing.T) {
	t.Parallel()
	imports := moduleImports(t)
	rules := map[string]bool{}
	for _, p := range []string{"queue", "index", "secrets", "hooks", "notify", "github", "workermanager", "purgecache", "superseder", "login", "object", "interactive", "workerprovider"} {
		rules["internal/"+p] = true
	}
	for pkg, also := range map[string][]string{"internal/api": nil, "internal/maintenance": {"internal/events", "internal/forge"}} {
		require.Contains(t, imports, pkg)
		for _, dep := range imports[pkg] {
			assert.False(t, rules[dep] || tier(dep) >= 3 || slices.Contains(also, dep), "%s imports the service package %s", pkg, dep)
		}
	}
}

// TestEveryRoutesPackageHasOneShape: each service's routes package
// answers its table through `func Routes(Deps) []api.Route` and has
// tests of its own.
func TestEveryRoutesPackageHasOneShape(t *testing.T) {
	t.Parallel()
	root := e2e.RepoRoot()
	for pkg := range moduleImports(t) {
		if !isServiceRoutes(pkg) {
			continue
		}
		files, err := parser.ParseDir(token.NewFileSet(), filepath.Join(root, pkg), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		found, tests := false, false
		for name, p := range files {
			if strings.HasSuffix(name, "_test") {
				tests = true
				continue
			}
			for _, f := range p.Files {
				for _, d := range f.Decls {
					fn, ok := d.(*ast.FuncDecl)
					if ok && fn.Recv == nil && fn.Name.Name == "Routes" {
						found = types(fn.Type.Params) == "Deps" && types(fn.Type.Results) == "[]api.Route"
					}
				}
			}
		}
		assert.True(t, found, "%s has no func Routes(Deps) []api.Route", pkg)
		assert.True(t, tests, "%s has no tests of its own", pkg)
	}
}

// TestStoreMethodsTakeAtMostThreeArguments holds the store's argument
// rule: an interface method takes the context and at most three more
// arguments; more go in a <Method>Params struct (Store.Close, which
// only ends the handle, takes none).
func TestStoreMethodsTakeAtMostThreeArguments(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(e2e.RepoRoot(), "internal", "store")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	methods := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !strings.HasSuffix(ts.Name.Name, "Store") {
				return true
			}
			iface, ok := ts.Type.(*ast.InterfaceType)
			if !ok {
				return false
			}
			for _, m := range iface.Methods.List {
				fn, ok := m.Type.(*ast.FuncType)
				if !ok || len(m.Names) == 0 || m.Names[0].Name == "Close" {
					continue
				}
				methods++
				n := 0
				for _, p := range fn.Params.List {
					n += max(1, len(p.Names))
				}
				first := ""
				if len(fn.Params.List) > 0 {
					first = types(&ast.FieldList{List: fn.Params.List[:1]})
				}
				assert.True(t, first == "context.Context" && n <= 4, "%s.%s (%s) takes %d arguments: the context first, at most three more", ts.Name.Name, m.Names[0].Name, e.Name(), n)
			}
			return false
		})
	}
	require.Greater(t, methods, 50, "the store's interfaces were found")
}

// types renders a field list's types, comma-separated ("Deps",
// "[]api.Route").
func types(fl *ast.FieldList) string {
	if fl == nil {
		return ""
	}
	var out []string
	for _, f := range fl.List {
		s := exprString(f.Type)
		for range max(1, len(f.Names)) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	}
	return "?"
}

// TestEveryStoreHasConformanceTestsOfItsOwn: each file of internal/store
// that declares a service's store interface has its conformance tests in
// a file of the same name in internal/store/storetest (the auth
// service's clients.go in auth.go); store.go only embeds them.
func TestEveryStoreHasConformanceTestsOfItsOwn(t *testing.T) {
	t.Parallel()
	root := e2e.RepoRoot()
	dir := filepath.Join(root, "internal", "store")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	renamed := map[string]string{"clients.go": "auth.go"}
	found := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "store.go" {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		declares := false
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok {
				for _, spec := range g.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && strings.HasSuffix(ts.Name.Name, "Store") && ts.Name.Name != "WorkHub" {
						_, isInterface := ts.Type.(*ast.InterfaceType)
						declares = declares || isInterface
					}
				}
			}
		}
		if !declares {
			continue
		}
		found++
		testFile := name
		if r, ok := renamed[name]; ok {
			testFile = r
		}
		_, err = os.Stat(filepath.Join(dir, "storetest", testFile))
		assert.NoError(t, err, "internal/store/%s declares a store interface; its conformance tests belong in internal/store/storetest/%s", name, testFile)
	}
	require.Greater(t, found, 15, "the store interfaces were found")
}
