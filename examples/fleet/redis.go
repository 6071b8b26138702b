package main

import (
	"fmt"
	"os"

	"github.com/proxybreaker/proxybreaker/internal/serverproc"
)

// redisServer is a redis-server the example started for itself: 127.0.0.1, a free port, its
// files in a temporary directory, nothing saved to disk. Kill stops it at once, as a crash
// would; Restart starts it again, empty, on the same port.
type redisServer struct {
	*serverproc.Process
	dir string
}

func findRedisServer() (string, error) {
	bin, err := serverproc.Find("redis-server", serverproc.RedisPaths...)
	if err != nil {
		return "", fmt.Errorf("%v (apt-get install redis-server), or pass -redis HOST:PORT", err)
	}
	return bin, nil
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
	p, err := serverproc.Start(serverproc.Redis(bin, dir))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &redisServer{Process: p, dir: dir}, nil
}

// close kills the server and removes its directory.
func (s *redisServer) close() {
	s.Kill()
	os.RemoveAll(s.dir)
}
