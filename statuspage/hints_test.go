package statuspage_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// poolClasses reads the pool package's source and returns the value of every constant declared
// with type Class: a class added there without a hint here fails TestEveryClassHasAHint.
func poolClasses(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "pool", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("pool sources: %v, %d files", err, len(files))
	}
	fset := token.NewFileSet()
	classes := map[string]string{} // constant name → value
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Class" {
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: constant %s is not a string literal: extend this test", fset.Position(name.Pos()), name.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					classes[name.Name] = v
				}
			}
		}
	}
	return classes
}

func TestEveryClassHasAHint(t *testing.T) {
	classes := poolClasses(t)
	// The parse must find the classes the pool documents; a refactor that hides them from it would
	// otherwise make this test pass vacuously.
	for _, c := range []pool.Class{pool.ClassOK, pool.ClassProxyAuth, pool.ClassNotAttempted} {
		found := false
		for _, v := range classes {
			found = found || v == string(c)
		}
		if !found {
			t.Fatalf("the parse of ../pool found %d classes and not %q", len(classes), c)
		}
	}
	for name, v := range classes {
		if h := statuspage.HintFor(pool.Class(v)); h == "" {
			t.Errorf("HintFor(pool.%s) = \"\", want a hint", name)
		} else if len(h) > 160 || strings.Contains(h, "\n") {
			t.Errorf("HintFor(pool.%s) = %q: longer than a table cell (160) or on several lines", name, h)
		}
	}
	for _, tc := range []struct {
		class pool.Class
		want  string // a phrase the hint must hold
	}{
		{pool.ClassProxyAuth, "check user/password or IP allowlist"},
		{pool.ClassProxyRefused, "gateway down or wrong port"},
		{pool.ClassRateLimited, "lower PerPair"},
		{pool.ClassBlocked, "WAF challenge"},
	} {
		if h := statuspage.HintFor(tc.class); !strings.Contains(h, tc.want) {
			t.Errorf("HintFor(%s) = %q, want it to say %q", tc.class, h, tc.want)
		}
	}
	if h := statuspage.HintFor("captcha_from_my_classifier"); h != "" {
		t.Errorf("HintFor(unknown class) = %q, want \"\"", h)
	}
}
