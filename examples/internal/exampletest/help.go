package exampletest

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
)

// minAboutWords is how many words a description needs at the least to say what an example shows.
const minAboutWords = 15

// CheckHelp checks that c's -h says what the example shows and how it is run: c is named for
// the directory the test runs in (the example's), and -h prints `go run ./examples/NAME`, the
// description and every flag, never the bare "Usage of" of the flag package. It must be called
// from the example's package test, whose working directory is the example's.
func CheckHelp(t *testing.T, c *cli.Command) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Base(dir); c.Name != want {
		t.Errorf("command name = %q, want %q, the example's directory", c.Name, want)
	}
	if n := len(strings.Fields(c.About)); n < minAboutWords {
		t.Errorf("description %q has %d words, want at least %d saying what the example shows", c.About, n, minAboutWords)
	}
	var out bytes.Buffer
	c.Flags.SetOutput(&out)
	if err := c.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("Parse(-h) = %v, want flag.ErrHelp", err)
	}
	help := out.String()
	if want := "Usage: go run ./examples/" + c.Name + " [flags]\n"; !strings.HasPrefix(help, want) {
		t.Errorf("-h prints\n%s\nwant it to start %q", help, want)
	}
	if strings.Contains(help, "Usage of") || !strings.Contains(help, c.About) {
		t.Errorf("-h prints\n%s\nwant the description %q and no bare \"Usage of\"", help, c.About)
	}
	c.Flags.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, "  -"+f.Name) {
			t.Errorf("-h prints\n%s\nwant the flag -%s", help, f.Name)
		}
	})
}
