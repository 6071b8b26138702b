package servertest

import (
	"strings"
	"testing"
	"time"
)

func TestTinyproxyConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  TinyproxyConfig
		want string // "" for valid
	}{
		{TinyproxyConfig{}, ""},
		{TinyproxyConfig{Name: "tp-a", User: "Alice_1.x-Y", Pass: "Pw.-_9", Bind: "127.0.0.2", Timeout: time.Second}, ""},
		{TinyproxyConfig{Bind: "::1"}, ""},
		{TinyproxyConfig{Name: `a"b`}, "Name"},
		{TinyproxyConfig{Name: "a\nb"}, "Name"},
		{TinyproxyConfig{User: "al!ce", Pass: "pw"}, "User"},
		{TinyproxyConfig{User: "alice"}, "Pass"},
		{TinyproxyConfig{User: "alice", Pass: "p w"}, "Pass"},
		{TinyproxyConfig{Pass: "pw"}, "User"},
		{TinyproxyConfig{Bind: "192.0.2.1"}, "Bind"},
		{TinyproxyConfig{Bind: "localhost"}, "Bind"},
		{TinyproxyConfig{Timeout: -time.Second}, "Timeout"},
	}
	for i, tt := range tests {
		err := tt.cfg.validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("step %d: validate(%+v) = %v, want nil", i, tt.cfg, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("step %d: validate(%+v) = %v, want an error about %s", i, tt.cfg, err, tt.want)
		case err != nil && strings.Contains(err.Error(), tt.cfg.Pass) && tt.cfg.Pass != "":
			t.Errorf("step %d: validate(%+v) = %v, want the password left out", i, tt.cfg, err)
		}
	}
}

func TestTinyproxyConfigTimeoutSeconds(t *testing.T) {
	tests := []struct {
		timeout time.Duration
		want    int64
	}{
		{0, 30},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{time.Millisecond, 1},
		{time.Minute, 60},
	}
	for i, tt := range tests {
		if got := (TinyproxyConfig{Timeout: tt.timeout}).timeoutSeconds(); got != tt.want {
			t.Errorf("step %d: timeoutSeconds(%v) = %d, want %d", i, tt.timeout, got, tt.want)
		}
	}
}

func TestTinyproxyConfigConf(t *testing.T) {
	got := TinyproxyConfig{Name: "tp-a", User: "alice", Pass: "s3cret", Bind: "127.0.0.2"}.conf(8888, "/tmp/x")
	want := `# written by servertest.Tinyproxy
Port 8888
Listen 127.0.0.1
Timeout 30
MaxClients 100
Allow 127.0.0.1
LogLevel Warning
LogFile "/tmp/x/tinyproxy.log"
PidFile "/tmp/x/tinyproxy.pid"
ViaProxyName "tp-a"
BasicAuth alice s3cret
Bind 127.0.0.2
`
	if got != want {
		t.Errorf("conf() =\n%s\nwant\n%s", got, want)
	}
	if got := (TinyproxyConfig{}).conf(8888, "/tmp/x"); !strings.Contains(got, "\nDisableViaHeader Yes\n") ||
		strings.Contains(got, "ConnectPort") || strings.Contains(got, "BasicAuth") || strings.Contains(got, "Bind") {
		t.Errorf("zero conf() =\n%s\nwant DisableViaHeader and no ConnectPort, BasicAuth or Bind", got)
	}
}

func TestTinyproxyConfigFilterAndConnectPorts(t *testing.T) {
	for i, tt := range []struct {
		cfg  TinyproxyConfig
		want string // "" for valid
	}{
		{TinyproxyConfig{Filter: []string{"denied.test", "a-b.c"}, ConnectPorts: []int{443, 65535, 1}}, ""},
		{TinyproxyConfig{Filter: []string{"denied.test$|.*"}}, "Filter"},
		{TinyproxyConfig{Filter: []string{""}}, "Filter"},
		{TinyproxyConfig{ConnectPorts: []int{0}}, "ConnectPorts"},
		{TinyproxyConfig{ConnectPorts: []int{65536}}, "ConnectPorts"},
	} {
		err := tt.cfg.validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("step %d: validate(%+v) = %v, want an error about %q (none if empty)", i, tt.cfg, err, tt.want)
		}
	}
	cfg := TinyproxyConfig{Filter: []string{"denied.test", "x"}, ConnectPorts: []int{443, 8443}}
	got := cfg.conf(8888, "/tmp/x")
	for _, line := range []string{`Filter "/tmp/x/filter"`, "FilterURLs Off", "FilterExtended On", "FilterDefaultDeny No",
		"ConnectPort 443", "ConnectPort 8443"} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("conf() =\n%s\nwant the line %q", got, line)
		}
	}
	if got, want := cfg.filter(), "^denied\\.test$\n^x$\n"; got != want {
		t.Errorf("filter() = %q, want %q", got, want)
	}
	if got := (TinyproxyConfig{}).conf(8888, "/tmp/x"); strings.Contains(got, "Filter") {
		t.Errorf("zero conf() =\n%s\nwant no Filter", got)
	}
}
