package serverproc

import "testing"

func TestRedisConf(t *testing.T) {
	got := redisConf(6399, "/tmp/x")
	want := `# written by serverproc.Redis
port 6399
bind 127.0.0.1
protected-mode yes
daemonize no
dir "/tmp/x"
logfile "/tmp/x/redis.log"
save ""
appendonly no
databases 1
`
	if got != want {
		t.Errorf("redisConf() =\n%s\nwant\n%s", got, want)
	}
}
