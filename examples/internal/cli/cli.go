package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
)

// Command is one example's command line.
type Command struct {
	// Name is the example's directory under examples/: -h shows it as `go run ./examples/NAME`.
	Name string
	// About says what the example shows, in a paragraph or two of plain text wrapped by hand.
	About string
	// Flags are the example's flags; their usage is printed under the description.
	Flags *flag.FlagSet
}

// New returns the command of the example in examples/name, which shows what about says; bind,
// when not nil, defines the example's flags on the command's flag set.
func New(name, about string, bind func(*flag.FlagSet)) *Command {
	c := &Command{Name: name, About: strings.TrimSpace(about), Flags: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.Flags.Usage = c.usage
	if bind != nil {
		bind(c.Flags)
	}
	return c
}

// usage prints the description and the flags to the flag set's output.
func (c *Command) usage() {
	out := c.Flags.Output()
	fmt.Fprintf(out, "Usage: go run ./examples/%s [flags]\n\n%s\n", c.Name, c.About)
	n := 0
	c.Flags.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(out, "\nFlags:\n")
		c.Flags.PrintDefaults()
	}
}

// Parse parses args (without the program name). For -h or -help it prints the description and
// returns flag.ErrHelp; for a bad flag it prints the error and the description.
func (c *Command) Parse(args []string) error { return c.Flags.Parse(args) }

// Help returns what -h prints.
func (c *Command) Help() string {
	var b strings.Builder
	out := c.Flags.Output()
	c.Flags.SetOutput(&b)
	defer c.Flags.SetOutput(out)
	c.Flags.Usage()
	return b.String()
}

// Main parses the command line and calls run with a context that ends on an interrupt (Ctrl-C).
// It exits 0 after -h, 2 after a bad flag, and 1 after printing "NAME: error" when run fails.
func Main(c *Command, run func(ctx context.Context) error) {
	os.Exit(c.main(os.Args[1:], os.Stderr, run))
}

// Seed returns seed, or for 0 (a -seed flag's "pick one") a random seed, short enough to type
// back in; an example prints the seed it ran with, so that a run can be repeated.
func Seed(seed uint64) uint64 {
	if seed != 0 {
		return seed
	}
	return rand.Uint64()>>12 + 1
}

// ErrorOf returns the error of a run that also returns what it came to (for the example's test):
// cli.Main(c, func(ctx context.Context) error { return cli.ErrorOf(run(ctx, cfg, os.Stdout)) }).
func ErrorOf[R any](_ R, err error) error { return err }

// main is Main without the exit, writing errors to stderr.
func (c *Command) main(args []string, stderr io.Writer, run func(ctx context.Context) error) int {
	c.Flags.SetOutput(stderr)
	if err := c.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return 1
	}
	return 0
}
