package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// redisServer is a redis-server the example started for itself: 127.0.0.1, a free port, its
// files in a temporary directory, nothing saved to disk.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan error
}

var redisPaths = []string{"/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server"}

func findRedisServer() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range redisPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("redis-server not found (apt-get install redis-server), or pass -redis HOST:PORT")
}

// startRedis starts a redis-server on 127.0.0.1 and waits until it answers PING.
func startRedis() (*redisServer, error) {
	bin, err := findRedisServer()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "proxybreaker-fleet-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	if err := s.start(bin); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *redisServer) start(bin string) error {
	_, port, _ := net.SplitHostPort(s.addr)
	conf := fmt.Sprintf("port %s\nbind 127.0.0.1\nprotected-mode yes\ndaemonize no\ndir %q\nlogfile %q\nsave \"\"\nappendonly no\n",
		port, s.dir, filepath.Join(s.dir, "redis.log"))
	confPath := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return err
	}
	s.cmd = exec.Command(bin, confPath)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ping(s.addr) == nil {
			return nil
		}
		select {
		case err := <-s.done:
			return fmt.Errorf("redis-server exited: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.kill()
	return errors.New("redis-server did not answer PING within 5s")
}

// kill stops the server at once, as a crash would.
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// restart starts a killed server again, empty, on the same port.
func (s *redisServer) restart() error {
	bin, err := findRedisServer()
	if err != nil {
		return err
	}
	return s.start(bin)
}

// close kills the server and removes its directory.
func (s *redisServer) close() {
	s.kill()
	os.RemoveAll(s.dir)
}

func ping(addr string) error {
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
