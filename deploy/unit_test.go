// Package deploy holds what runs proxybreakerd in production: a hardened systemd unit. Its test
// checks the unit with systemd's own tools against a freshly built binary.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// unitExecPath is where the unit expects the binary; the test points a copy at its own build.
const unitExecPath = "/usr/local/bin/proxybreakerd"

// hardening lists directives the unit must hold, whatever systemd-analyze scores: the issue's
// list and what keeps a relay that handles credentials boxed in.
var hardening = []string{
	"DynamicUser=yes", "StateDirectory=proxybreakerd", "ProtectSystem=strict", "ProtectHome=yes",
	"PrivateTmp=yes", "PrivateDevices=yes", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n",
	"AmbientCapabilities=\n", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
	"SystemCallFilter=@system-service", "SystemCallFilter=~@privileged", "SystemCallArchitectures=native",
	"MemoryDenyWriteExecute=yes", "RestrictNamespaces=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes",
	"ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectControlGroups=yes", "UMask=0077",
}

// unitForTest builds cmd/proxybreakerd into a temporary directory and returns the path of a copy
// of the unit whose ExecStart runs that build (systemd-analyze verify wants an executable there).
func unitForTest(t *testing.T) (unit string, text string) {
	t.Helper()
	raw, err := os.ReadFile("proxybreakerd.service")
	if err != nil {
		t.Fatal(err)
	}
	text = string(raw)
	if !strings.Contains(text, "ExecStart="+unitExecPath+"\n") {
		t.Fatalf("the unit's ExecStart is not %s", unitExecPath)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "proxybreakerd")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", bin, "../cmd/proxybreakerd").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/proxybreakerd: %v\n%s", err, out)
	}
	unit = filepath.Join(dir, "proxybreakerd.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(text, unitExecPath, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	return unit, text
}

// TestUnitVerifies: `systemd-analyze verify` accepts the unit with no warning at all (an unknown
// or misspelt directive is only a warning to systemd, so any output fails the test), and the unit
// holds every hardening directive on the list.
func TestUnitVerifies(t *testing.T) {
	sa := servertest.ClientBinary(t, "systemd-analyze", "/usr/bin/systemd-analyze")
	unit, text := unitForTest(t)
	out, err := exec.Command(sa, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, d := range hardening {
		if !strings.Contains(text, "\n"+d) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(d))
		}
	}
}

// TestUnitExposure: `systemd-analyze security --offline` scores the unit's exposure at 2.0 or
// less ("OK" on systemd's scale of 0 to 10, where an unhardened service scores 9.6).
func TestUnitExposure(t *testing.T) {
	sa := servertest.ClientBinary(t, "systemd-analyze", "/usr/bin/systemd-analyze")
	unit, _ := unitForTest(t)
	out, err := exec.Command(sa, "security", "--offline=true", "--threshold=20", "--no-pager", unit).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security --threshold=20: %v (exposure above 2.0)\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Log(lines[len(lines)-1])
}
