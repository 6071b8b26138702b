package servertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/serverproc"
)

// RedisClusterTimeout bounds how long StartRedisCluster waits for the nodes of a new cluster to
// agree that it is up (each one's CLUSTER INFO reporting cluster_state:ok, every node known and
// every slot assigned).
const RedisClusterTimeout = 10 * time.Second

// redisSlots is the number of hash slots of a Redis Cluster.
const redisSlots = 16384

// RedisCluster is a running Redis Cluster of masters without replicas, each a redis-server on
// 127.0.0.1 with cluster-enabled yes, its own port and cluster bus port chosen for it and its
// config, nodes.conf and log in a t.TempDir() of its own, nothing on disk. Master i serves the
// i-th of equal ranges of the 16384 hash slots.
type RedisCluster struct {
	t     testing.TB
	nodes []*serverproc.Process
}

// StartRedisCluster starts masters redis-servers in cluster mode, assigns each an equal range of
// the hash slots (CLUSTER ADDSLOTS), joins them (CLUSTER MEET) and waits, at most
// RedisClusterTimeout, until every node reports the cluster up. Each node is killed, and waited
// for, when the test ends; its log is copied to the test output if the test failed. A client such
// as go-redis's ClusterClient finds the cluster from any of Addrs.
//
// When no redis-server binary is found the test is skipped, or fails when the CI environment
// variable is true. It needs redis-server 7 or later (cluster-port).
func StartRedisCluster(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	if masters < 1 || masters > 16 {
		t.Fatalf("servertest: StartRedisCluster(%d): want 1 to 16 masters", masters)
	}
	bin := binary(t, "redis-server", serverproc.RedisPaths...)
	c := &RedisCluster{t: t}
	busPorts := make([]int, masters)
	for i := range masters {
		spec := clusterNodeSpec(bin, t.TempDir(), &busPorts[i])
		spec.Name = fmt.Sprintf("redis-server cluster node %d", i)
		spec.Timeout = RedisStartTimeout
		c.nodes = append(c.nodes, start(t, spec))
	}
	for i := range masters {
		lo, hi := slotRange(i, masters)
		args := []string{"CLUSTER", "ADDSLOTS"}
		for s := lo; s <= hi; s++ {
			args = append(args, strconv.Itoa(s))
		}
		if _, err := c.Do(i, args...); err != nil {
			t.Fatalf("servertest: node %d: CLUSTER ADDSLOTS %d…%d: %v", i, lo, hi, err)
		}
	}
	for i := 1; i < masters; i++ {
		_, port, _ := net.SplitHostPort(c.nodes[i].Addr())
		if _, err := c.Do(0, "CLUSTER", "MEET", "127.0.0.1", port, strconv.Itoa(busPorts[i])); err != nil {
			t.Fatalf("servertest: node 0: CLUSTER MEET node %d: %v", i, err)
		}
	}
	c.waitUp()
	return c
}

// clusterNodeSpec is serverproc.Redis's spec with cluster mode on: nodes.conf in dir (removed
// before each start, so a node always starts as a new one) and a cluster bus port of its own,
// recorded in *bus. The default bus port, port+10000, could be taken, or above 65535.
func clusterNodeSpec(bin, dir string, bus *int) serverproc.Spec {
	spec := serverproc.Redis(bin, dir)
	args := spec.Args
	spec.Args = func(port int) ([]string, error) {
		a, err := args(port)
		if err != nil {
			return nil, err
		}
		if err := os.Remove(filepath.Join(dir, "nodes.conf")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		*bus = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		return append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(*bus),
			"--cluster-announce-ip", "127.0.0.1",
			"--cluster-node-timeout", "5000",
		), nil
	}
	return spec
}

// slotRange is the hash slots master i of n serves, lo to hi inclusive.
func slotRange(i, n int) (lo, hi int) {
	return i * redisSlots / n, (i+1)*redisSlots/n - 1
}

// waitUp waits until every node reports the cluster up, with every node known and every slot
// assigned; it fails the test after RedisClusterTimeout.
func (c *RedisCluster) waitUp() {
	c.t.Helper()
	want := []string{"cluster_state:ok", "cluster_slots_assigned:" + strconv.Itoa(redisSlots),
		"cluster_known_nodes:" + strconv.Itoa(len(c.nodes))}
	deadline := time.Now().Add(RedisClusterTimeout)
	for {
		var last string
		for i := range c.nodes {
			info, err := c.Do(i, "CLUSTER", "INFO")
			if err != nil {
				last = fmt.Sprintf("node %d: %v", i, err)
				break
			}
			for _, w := range want {
				if !hasLine(info, w) {
					last = fmt.Sprintf("node %d: no %q in CLUSTER INFO:\n%s", i, w, info)
					break
				}
			}
			if last != "" {
				break
			}
		}
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("servertest: Redis Cluster of %d not up after %v: %s", len(c.nodes), RedisClusterTimeout, last)
		}
		time.Sleep(20 * time.Millisecond) // polling another process, not waiting on a clock of ours
	}
}

func hasLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// Addrs returns the masters' addresses, 127.0.0.1:PORT, master i's at index i.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Owner returns the index of the master that serves key's hash slot.
func (c *RedisCluster) Owner(key string) int {
	c.t.Helper()
	reply, err := c.Do(0, "CLUSTER", "KEYSLOT", key)
	slot, perr := strconv.Atoi(reply)
	if err != nil || perr != nil {
		c.t.Fatalf("servertest: CLUSTER KEYSLOT %q = %q, %v", key, reply, err)
	}
	for i := range c.nodes {
		if lo, hi := slotRange(i, len(c.nodes)); slot >= lo && slot <= hi {
			return i
		}
	}
	c.t.Fatalf("servertest: slot %d of %q belongs to no master", slot, key)
	return -1
}

// Do sends one command to master i alone — no redirection is followed — and returns its reply as
// text: a status or a bulk string as is, an integer in decimal, a null as "". An error reply,
// MOVED for a key of another master's slot for one, is returned as an error with its text.
// Array replies are not supported.
func (c *RedisCluster) Do(i int, args ...string) (string, error) {
	return redisCall(c.nodes[i].Addr(), args...)
}

// redisCall sends one command to addr in RESP and reads the reply (see RedisCluster.Do).
func redisCall(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch body := line[1:]; line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", errors.New(body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n > 1<<20 {
			return "", fmt.Errorf("bad bulk length %q", body)
		}
		if n < 0 {
			return "", nil
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(r, data); err != nil {
			return "", err
		}
		return string(data[:n]), nil
	}
	return "", fmt.Errorf("unsupported reply %q", line)
}
