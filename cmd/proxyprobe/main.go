// Command proxyprobe is the pre-dispatch check of a proxy pool: it probes every target through
// every proxy within a hard deadline and writes a JSON report (package probe, schema in
// docs/probe.md) on stdout, with a verdict a scheduler branches on by exit code.
//
//	proxyprobe -proxies proxies.txt -target https://shop.example/robots.txt [flags]
//	cat proxies.txt | proxyprobe -proxies - -targets targets.txt -format table
//
// Exit codes: 0 HEALTHY, 1 DEGRADED, 2 CRITICAL; 64 bad usage, 65 a bad proxy or target list,
// 66 an input file that cannot be read, 73 a state file that cannot be written, 74 stdout that
// cannot be written. A -state file is checked before the run; if it still cannot be written after
// it, the report is written all the same and the code is 73. Errors are one line on stderr and never show a proxy password. When stderr is
// a terminal, a progress line is drawn there; when it is not (a scheduler's log), one summary line
// is written there once the report is out:
//
//	proxyprobe: DEGRADED — 97/100 exits healthy, 2 failing, 1 parked; 4 targets; 1.2s (deadline 10s)
//
// -quiet leaves both out: then stderr holds errors only.
//
// With -state FILE it also writes a pool.SavedState (JSON) that pool.Pool.Restore loads
// to warm start: exits that failed permanently start parked, throttled pairs start OPEN for their
// Retry-After.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Exit codes beyond the verdicts' 0, 1 and 2 (sysexits.h).
const (
	exitUsage     = 64 // EX_USAGE: bad flags or flag values
	exitData      = 65 // EX_DATAERR: a bad proxy or target list
	exitNoInput   = 66 // EX_NOINPUT: an input file that cannot be opened
	exitCantCreat = 73 // EX_CANTCREAT: the state file cannot be written
	exitIO        = 74 // EX_IOERR: stdout cannot be written
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, isTerminal(os.Stderr))
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a character device (a terminal), without a dependency.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// failure is an error with the exit code it ends the command with.
type failure struct {
	code int
	err  error
}

func (f *failure) Error() string { return f.err.Error() }

func fail(code int, format string, args ...any) error {
	return &failure{code, fmt.Errorf(format, args...)}
}

// run is the command: it returns the exit code. tty says whether stderr is a terminal: a progress
// line there, or else a summary line at the end.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) int {
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stderr)
		return 0
	}
	if err == nil {
		err = o.check()
	}
	if err == nil && o.state != "" {
		err = checkState(o.state) // before the run, not after it: a run can take a while
	}
	var rep *probe.Report
	if err == nil {
		rep, err = probeOnce(ctx, o, stdin, stderr, tty && !o.quiet)
	}
	if err != nil {
		return failed(stderr, err)
	}
	// The state may still fail to be written (the disk filled, the directory went): the report
	// is written all the same, and the error comes after it.
	var stateErr error
	if o.state != "" {
		stateErr = writeState(o.state, probe.StateFrom(rep, time.Now(), probe.StateSettings{ParkFor: o.park}))
	}
	if err := writeReport(stdout, rep, o.format); err != nil {
		return failed(stderr, errors.Join(err, stateErr))
	}
	if !tty && !o.quiet {
		fmt.Fprintln(stderr, summaryLine(rep))
	}
	if stateErr != nil {
		return failed(stderr, stateErr)
	}
	return rep.Verdict.ExitCode()
}

// failed writes err on stderr, on one line whatever it joined (a scheduler's log shows one event),
// and returns its exit code: the first failure's, else exitUsage.
func failed(stderr io.Writer, err error) int {
	code := exitUsage
	var f *failure
	if errors.As(err, &f) {
		code = f.code
	}
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	fmt.Fprintf(stderr, "proxyprobe: %s\n", msg)
	return code
}

// probeOnce reads the inputs, runs the probe and returns its report.
func probeOnce(ctx context.Context, o *options, stdin io.Reader, stderr io.Writer, progress bool) (*probe.Report, error) {
	exits, err := readExits(o.proxies, stdin)
	if err != nil {
		return nil, err
	}
	targets := append([]string(nil), o.targets...)
	if o.targetsFile != "" {
		f, err := os.Open(o.targetsFile)
		if err != nil {
			return nil, fail(exitNoInput, "targets: %v", pathError(err))
		}
		more, err := probe.ReadTargets(f)
		f.Close()
		if err != nil {
			return nil, fail(exitData, "%s: %v", o.targetsFile, err)
		}
		targets = append(targets, more...)
	}
	if len(targets) == 0 {
		return nil, fail(exitUsage, "no targets: give -target URL or -targets FILE (see -h)")
	}
	tmpl := transport.DefaultBaseTemplate()
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return nil, fail(exitNoInput, "-ca: %v", pathError(err))
		}
		roots, err := x509.SystemCertPool()
		if err != nil || roots == nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fail(exitData, "-ca %s: no PEM certificate found", o.ca)
		}
		tmpl.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	cfg := o.config(exits, targets, tmpl)
	pr := &progressLine{w: stderr}
	if progress {
		cfg.Progress = pr.update
	}
	p, err := probe.New(cfg)
	if err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	rep := p.Run(ctx)
	pr.end()
	if rep.Capacity, err = probe.Capacities(rep, exits); err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	return rep, nil
}

// readExits reads the proxy list from path, or stdin for "-".
func readExits(path string, stdin io.Reader) ([]*pool.Exit, error) {
	r := stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fail(exitNoInput, "proxies: %v", pathError(err))
		}
		defer f.Close()
		r, name = f, path
	}
	exits, err := pool.ReadExits(r)
	if err != nil {
		return nil, fail(exitData, "%s: %v", name, err)
	}
	if len(exits) == 0 {
		return nil, fail(exitData, "%s: the proxy list has no proxies", name)
	}
	seen := make(map[string]bool, len(exits))
	for _, e := range exits {
		if seen[e.Label()] {
			return nil, fail(exitData, "%s: two proxies labelled %q: give each a unique label=", name, e.Label())
		}
		seen[e.Label()] = true
	}
	return exits, nil
}

// pathError shortens an *os.PathError to "open NAME: reason".
func pathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %s: %v", pe.Op, pe.Path, pe.Err)
	}
	return err
}

// writeReport streams the report to w: its size grows with the exits, its memory does not.
func writeReport(w io.Writer, rep *probe.Report, format string) error {
	var err error
	if format == "table" {
		err = rep.WriteTable(w)
	} else {
		err = rep.WriteJSON(w)
	}
	if err != nil {
		return fail(exitIO, "writing the report: %v", err)
	}
	return nil
}

// checkState makes sure a state file can be written at path before the run: path is not a
// directory, and its directory takes a new file (one is created and removed).
func checkState(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fail(exitCantCreat, "-state %s: is a directory", path)
	}
	tmp, err := createStateTemp(path)
	if err != nil {
		return err
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return nil
}

// createStateTemp creates the temporary file a state is written to before it is renamed to path:
// in path's directory, so that the rename cannot cross file systems.
func createStateTemp(path string) (*os.File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, stateError(path, err)
	}
	return tmp, nil
}

// stateError is the failure to write the state file at path. It names path as the user gave it,
// never the temporary file the state goes through, and only the cause of err.
func stateError(path string, err error) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fail(exitCantCreat, "-state %s: not written: %v", path, err)
}

// writeState writes st to path atomically: a temporary file in the same directory, renamed.
func writeState(path string, st pool.SavedState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return stateError(path, err)
	}
	tmp, err := createStateTemp(path)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return stateError(path, err)
	}
	if err := tmp.Close(); err != nil {
		return stateError(path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return stateError(path, err)
	}
	return nil
}

// progressLine redraws one line on w, at most every 100 ms and once at the end.
type progressLine struct {
	w           io.Writer
	last        time.Time
	done, total int
	shown       bool
}

func (p *progressLine) update(done, total int) {
	p.done, p.total = done, total
	if time.Since(p.last) < 100*time.Millisecond && done < total {
		return
	}
	p.last, p.shown = time.Now(), true
	fmt.Fprintf(p.w, "\rproxyprobe: %d/%d probes", done, total)
}

func (p *progressLine) end() {
	if p.shown {
		fmt.Fprintf(p.w, "\rproxyprobe: %d/%d probes\n", p.done, p.total)
	}
}
