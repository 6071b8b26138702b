package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSystemdUnit: deploy/proxybreakerd.service passes `systemd-analyze verify` (with its ExecStart
// pointed at an executable that exists here), and its ExecStart's flags are the daemon's.
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("systemd-analyze missing; CI must install systemd")
		}
		t.Skip("systemd-analyze missing")
	}
	b, err := os.ReadFile("../../deploy/proxybreakerd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	var exec0 string
	for line := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			exec0 = v
		}
	}
	fields := strings.Fields(exec0)
	if len(fields) < 2 || fields[0] != "/usr/local/bin/proxybreakerd" {
		t.Fatalf("ExecStart=%q, want /usr/local/bin/proxybreakerd with flags", exec0)
	}
	if err := newFlagSet(&options{}).Parse(fields[1:]); err != nil {
		t.Errorf("ExecStart's flags: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "proxybreakerd.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/proxybreakerd", self)), 0o644)
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
