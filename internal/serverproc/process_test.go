package serverproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as the server: with SERVERPROC_HELPER set it runs helper instead of the
// tests, so Process is tested without any server installed.
func TestMain(m *testing.M) {
	if mode := os.Getenv("SERVERPROC_HELPER"); mode != "" {
		helper(mode, os.Args[1:])
		return
	}
	goleak.VerifyTestMain(m)
}

// helper runs as the child process: "listen" serves TCP on 127.0.0.1:ARG until killed, "exit"
// writes a line and exits with status 3.
func helper(mode string, args []string) {
	switch mode {
	case "listen":
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", args[0]))
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(2)
			}
			c.Close()
		}
	case "exit":
		fmt.Println("helper gives up")
		os.Exit(3)
	}
}

// helperSpec runs the test binary in mode, counting the starts in *starts.
func helperSpec(t *testing.T, mode string, starts *int) Spec {
	t.Setenv("SERVERPROC_HELPER", mode)
	return Spec{
		Name: "helper",
		Bin:  os.Args[0],
		Dir:  t.TempDir(),
		Args: func(port int) ([]string, error) {
			*starts++
			return []string{strconv.Itoa(port)}, nil
		},
	}
}

func TestKillAndRestart(t *testing.T) {
	var starts int
	p, err := Start(helperSpec(t, "listen", &starts))
	if err != nil {
		t.Fatalf("Start = %v, want nil", err)
	}
	defer p.Kill()
	addr := p.Addr()
	if err := accepting(addr); err != nil {
		t.Fatalf("step 0: dial %s = %v, want a connection", addr, err)
	}
	p.Kill()
	p.Kill() // killing a stopped server does nothing
	if err := accepting(addr); err == nil {
		t.Fatalf("step 1: dial %s after Kill = nil, want an error", addr)
	}
	if err := p.Restart(); err != nil {
		t.Fatalf("Restart = %v, want nil", err)
	}
	if p.Addr() != addr || accepting(addr) != nil {
		t.Errorf("step 2: after Restart Addr() = %s (accepting: %v), want %s accepting", p.Addr(), accepting(p.Addr()), addr)
	}
	p.Stop(time.Second)
	p.Stop(time.Second) // stopping a stopped server does nothing
	if err := accepting(addr); err == nil {
		t.Errorf("step 3: dial %s after Stop = nil, want an error", addr)
	}
	if starts != 2 {
		t.Errorf("Args called %d times, want 2", starts)
	}
}

// TestStartRetriesAServerThatExits: a server that exits before it is ready is tried on three
// ports, and the error carries its output.
func TestStartRetriesAServerThatExits(t *testing.T) {
	var starts int
	_, err := Start(helperSpec(t, "exit", &starts))
	if err == nil || !errors.Is(err, errExited) || !strings.Contains(err.Error(), "helper, attempt 3: ") ||
		!strings.Contains(err.Error(), "--- helper.out\nhelper gives up\n") {
		t.Errorf("Start = %v, want errExited on attempt 3 with the output", err)
	}
	if starts != 3 {
		t.Errorf("Args called %d times, want 3", starts)
	}
}

// TestStartGivesUpOnAServerNeverReady: a running server that is never ready is killed after
// Timeout and not tried again.
func TestStartGivesUpOnAServerNeverReady(t *testing.T) {
	var starts int
	spec := helperSpec(t, "listen", &starts)
	spec.Ready = func(string) error { return errors.New("still loading") }
	spec.Timeout = 100 * time.Millisecond
	_, err := Start(spec)
	if err == nil || errors.Is(err, errExited) || !strings.Contains(err.Error(), "helper, attempt 1: ") ||
		!strings.Contains(err.Error(), "not ready after 100ms: still loading") {
		t.Errorf("Start = %v, want not ready on attempt 1", err)
	}
	if starts != 1 {
		t.Errorf("Args called %d times, want 1", starts)
	}
}

func TestFind(t *testing.T) {
	if _, err := Find("serverproc-no-such-binary", "/nonexistent/a", "/nonexistent/b"); err == nil ||
		err.Error() != "serverproc-no-such-binary not found on PATH or at /nonexistent/a, /nonexistent/b" {
		t.Errorf("Find(missing) = %v, want not found naming both paths", err)
	}
	if got, err := Find("serverproc-no-such-binary", "/nonexistent", os.Args[0]); err != nil || got != os.Args[0] {
		t.Errorf("Find(missing, %s) = %q, %v; want the path", os.Args[0], got, err)
	}
}
