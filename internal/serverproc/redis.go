package serverproc

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RedisPaths are where redis-server is looked for after a PATH lookup:
// Find("redis-server", RedisPaths...).
var RedisPaths = []string{"/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server"}

// Redis returns the Spec of a redis-server run by bin with its config, log and data directory in
// dir: loopback only, no snapshots and no append-only file, so a restarted server is empty, as
// one that lost its memory in an outage. It is ready once it answers PING.
func Redis(bin, dir string) Spec {
	return Spec{
		Name: "redis-server",
		Bin:  bin,
		Dir:  dir,
		Out:  "redis.out",
		Logs: []string{"redis.log"},
		Args: func(port int) ([]string, error) {
			conf := filepath.Join(dir, "redis.conf")
			if err := os.WriteFile(conf, []byte(redisConf(port, dir)), 0o600); err != nil {
				return nil, err
			}
			return []string{conf}, nil
		},
		Ready: pingRedis,
	}
}

// redisConf renders the redis.conf for a server on 127.0.0.1:port with its files in dir: loopback
// only, no snapshots and no append-only file (a restart starts empty), one database.
func redisConf(port int, dir string) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# written by serverproc.Redis")
	line("port %d", port)
	line("bind 127.0.0.1")
	line("protected-mode yes")
	line("daemonize no")
	line(`dir "%s"`, dir)
	line(`logfile "%s"`, filepath.Join(dir, "redis.log"))
	line(`save ""`)
	line("appendonly no")
	line("databases 1")
	return b.String()
}

// pingRedis sends one inline PING to addr and checks the answer. A server still loading answers
// -LOADING, which is not ready.
func pingRedis(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}
