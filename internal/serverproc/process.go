package serverproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultTimeout is how long Start and Restart wait for a server to become ready when
// Spec.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// DefaultInterval is how often a starting server is polled when Spec.Interval is zero.
const DefaultInterval = 10 * time.Millisecond

// attempts is how many ports Start tries: a port found free can be taken by another process
// before the server binds it, and the server then exits at once.
const attempts = 3

// Spec describes a server to run on 127.0.0.1.
type Spec struct {
	// Name names the server in errors, e.g. "redis-server".
	Name string
	// Bin is the path of the binary (see Find).
	Bin string
	// Dir is the server's working directory and holds its config and output. It must exist; the
	// caller removes it.
	Dir string
	// Out is the file in Dir that receives the server's stdout and stderr, appended to across
	// restarts. Default Name + ".out".
	Out string
	// Logs are further files in Dir, written by the server itself, whose ends go into error
	// messages after Out's.
	Logs []string
	// Args writes the server's config for 127.0.0.1:port into Dir and returns the arguments to
	// run Bin with. It is called before every start, so a restart rewrites the config.
	Args func(port int) ([]string, error)
	// Ready reports whether the server on addr (127.0.0.1:port) is ready. Nil means ready once it
	// accepts a TCP connection.
	Ready func(addr string) error
	// Timeout bounds how long a start waits for Ready. Zero means DefaultTimeout.
	Timeout time.Duration
	// Interval is how often Ready is polled. Zero means DefaultInterval.
	Interval time.Duration
}

// Process is a server started by Start. Its methods may be called concurrently.
type Process struct {
	spec Spec
	port int
	addr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
}

// errExited marks a server that exited before it was ready, most likely because its port was
// taken meanwhile.
var errExited = errors.New("exited before it was ready")

// Start starts spec's server on a free 127.0.0.1 port and waits until it is ready. A server that
// exits first is tried again on another port, up to three times. The error names the attempt and
// ends with the tail of the server's output and logs.
func Start(spec Spec) (*Process, error) {
	if spec.Out == "" {
		spec.Out = spec.Name + ".out"
	}
	if spec.Timeout == 0 {
		spec.Timeout = DefaultTimeout
	}
	if spec.Interval == 0 {
		spec.Interval = DefaultInterval
	}
	if spec.Ready == nil {
		spec.Ready = accepting
	}
	p := &Process{spec: spec}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err == nil {
			p.port, p.addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			err = p.start()
		}
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errExited) || attempt == attempts {
			return nil, fmt.Errorf("%s, attempt %d: %w", spec.Name, attempt, err)
		}
	}
}

// Addr returns 127.0.0.1:PORT, the same after a Restart.
func (p *Process) Addr() string { return p.addr }

// Kill kills the server with SIGKILL and waits for it. Killing a stopped server does nothing.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

// Stop stops the server with SIGTERM, then SIGKILL if it has not exited after grace, and waits
// for it. Stopping a stopped server does nothing.
func (p *Process) Stop(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// Signal sends sig to the server, SIGSTOP or SIGCONT for instance. Signalling a stopped server
// does nothing.
func (p *Process) Signal(sig os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.cmd.Process.Signal(sig)
	}
}

// Restart kills the server if it runs, starts it again on the same port and waits until it is
// ready.
func (p *Process) Restart() error {
	p.Kill()
	return p.start()
}

// Tail returns the end of the server's output and logs, for error messages.
func (p *Process) Tail() string {
	const max = 4 << 10
	var b strings.Builder
	for _, name := range append([]string{p.spec.Out}, p.spec.Logs...) {
		data, err := os.ReadFile(filepath.Join(p.spec.Dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		if len(data) > max {
			data = data[len(data)-max:]
		}
		fmt.Fprintf(&b, "--- %s\n%s", name, data)
	}
	return b.String()
}

// start runs the server on p.addr and waits until it is ready.
func (p *Process) start() error {
	args, err := p.spec.Args(p.port)
	if err != nil {
		return err
	}
	// An *os.File as stdout and stderr lets the child write directly: exec starts no copying
	// goroutines, and nothing waits on a pipe.
	out, err := os.OpenFile(filepath.Join(p.spec.Dir, p.spec.Out), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()

	cmd := exec.Command(p.spec.Bin, args...)
	cmd.Dir = p.spec.Dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	if err := p.waitReady(exited); err != nil {
		if !errors.Is(err, errExited) {
			cmd.Process.Kill()
			<-exited
		}
		return fmt.Errorf("%s: %w\n%s", p.addr, err, p.Tail())
	}
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return nil
}

// waitReady polls Spec.Ready until it reports the server ready, the process exits (reported on
// exited), or Spec.Timeout passes.
func (p *Process) waitReady(exited <-chan error) error {
	deadline := time.NewTimer(p.spec.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(p.spec.Interval)
	defer tick.Stop()
	for {
		last := p.spec.Ready(p.addr)
		if last == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%w (%v)", errExited, err)
		case <-deadline.C:
			return fmt.Errorf("not ready after %v: %v", p.spec.Timeout, last)
		case <-tick.C:
		}
	}
}

// accepting reports whether addr accepts a TCP connection.
func accepting(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// Find returns the path of the named binary: a PATH lookup, then the first of paths that is an
// executable file (/usr/sbin, for one, is often not on a user's PATH).
func Find(name string, paths ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH or at %s", name, strings.Join(paths, ", "))
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
