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

// RedisCluster is a running Redis Cluster, each node a redis-server on 127.0.0.1 with
// cluster-enabled yes, its own port and cluster bus port chosen for it and its config, nodes.conf
// and log in a t.TempDir() of its own, nothing on disk. Master i (node i) serves the i-th of equal
// ranges of the 16384 hash slots; with replicas, node masters+r×masters+i is one of master i's.
type RedisCluster struct {
	t       testing.TB
	masters int
	nodes   []*serverproc.Process
}

// StartRedisCluster starts masters redis-servers in cluster mode, assigns each an equal range of
// the hash slots (CLUSTER ADDSLOTS), joins them (CLUSTER MEET) and waits, at most
// RedisClusterTimeout, until every node reports the cluster up. Each node is killed, and waited
// for, when the test ends; its log is copied to the test output if the test failed. A client such
// as go-redis's ClusterClient finds the cluster from any of Addrs.
//
// When no redis-server binary is found the test is skipped, or fails when the CI environment
// variable is true. It needs redis-server 7 or later (cluster-port). It is shorthand for
// StartRedisClusterReplicas(t, masters, 0).
func StartRedisCluster(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	return StartRedisClusterReplicas(t, masters, 0)
}

// StartRedisClusterReplicas is StartRedisCluster with replicas replicas per master (CLUSTER
// REPLICATE), and waits, within the same RedisClusterTimeout, until every replica's link to its
// master is up. With replicas the cluster node timeout is 2 s, so that a replica takes over a
// killed master (Kill) within a few seconds.
func StartRedisClusterReplicas(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	if masters < 1 || masters > 16 || replicas < 0 || replicas > 2 {
		t.Fatalf("servertest: StartRedisClusterReplicas(%d, %d): want 1 to 16 masters, 0 to 2 replicas each", masters, replicas)
	}
	bin := binary(t, "redis-server", serverproc.RedisPaths...)
	c := &RedisCluster{t: t, masters: masters}
	n := masters * (1 + replicas)
	timeout := "5000"
	if replicas > 0 {
		timeout = "2000"
	}
	busPorts := make([]int, n)
	for i := range n {
		spec := clusterNodeSpec(bin, t.TempDir(), timeout, &busPorts[i])
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
	for i := 1; i < n; i++ {
		_, port, _ := net.SplitHostPort(c.nodes[i].Addr())
		if _, err := c.Do(0, "CLUSTER", "MEET", "127.0.0.1", port, strconv.Itoa(busPorts[i])); err != nil {
			t.Fatalf("servertest: node 0: CLUSTER MEET node %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(RedisClusterTimeout)
	for i := masters; i < n; i++ {
		c.replicate(i, i%masters, deadline)
	}
	c.waitUp(deadline)
	return c
}

// replicate makes node i a replica of master m and waits until its link to m is up.
func (c *RedisCluster) replicate(i, m int, deadline time.Time) {
	c.t.Helper()
	id, err := c.Do(m, "CLUSTER", "MYID")
	if err != nil {
		c.t.Fatalf("servertest: node %d: CLUSTER MYID: %v", m, err)
	}
	for {
		// A node learns the master's id through the cluster bus: until then REPLICATE fails.
		_, err = c.Do(i, "CLUSTER", "REPLICATE", id)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("servertest: node %d: CLUSTER REPLICATE %s: %v", i, id, err)
		}
		time.Sleep(20 * time.Millisecond) // polling another process, not waiting on a clock of ours
	}
	for {
		info, err := c.Do(i, "INFO", "replication")
		if err == nil && hasLine(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("servertest: node %d: no master_link_status:up after %v: %s %v", i, RedisClusterTimeout, info, err)
		}
		time.Sleep(20 * time.Millisecond) // polling another process, not waiting on a clock of ours
	}
}

// clusterNodeSpec is serverproc.Redis's spec with cluster mode on: nodes.conf in dir (removed
// before each start, so a node always starts as a new one), the node timeout in ms and a cluster
// bus port of its own, recorded in *bus. The default bus port, port+10000, could be taken, or
// above 65535.
func clusterNodeSpec(bin, dir, nodeTimeout string, bus *int) serverproc.Spec {
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
			"--cluster-node-timeout", nodeTimeout,
			"--repl-diskless-sync-delay", "0", // a replica's first sync at once, not 5 s later
		), nil
	}
	return spec
}

// slotRange is the hash slots master i of n serves, lo to hi inclusive.
func slotRange(i, n int) (lo, hi int) {
	return i * redisSlots / n, (i+1)*redisSlots/n - 1
}

// waitUp waits until every node reports the cluster up, with every node known and every slot
// assigned; it fails the test after deadline.
func (c *RedisCluster) waitUp(deadline time.Time) {
	c.t.Helper()
	want := []string{"cluster_state:ok", "cluster_slots_assigned:" + strconv.Itoa(redisSlots),
		"cluster_known_nodes:" + strconv.Itoa(len(c.nodes))}
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
	addrs := make([]string, c.masters)
	for i, n := range c.nodes[:c.masters] {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Kill kills node i with SIGKILL, as a crash would, and waits for it; a replica of a killed
// master takes over its slots once the other masters agree it failed (about twice the node
// timeout). Killing a stopped node does nothing.
func (c *RedisCluster) Kill(i int) { c.nodes[i].Kill() }

// Role returns node i's role as INFO replication reports it: "master" or "slave".
func (c *RedisCluster) Role(i int) (string, error) {
	info, err := c.Do(i, "INFO", "replication")
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "role:"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("node %d: no role in INFO replication", i)
}

// Owner returns the index of the master that serves key's hash slot at the start (a failover
// moves it to a replica).
func (c *RedisCluster) Owner(key string) int {
	c.t.Helper()
	reply, err := c.Do(0, "CLUSTER", "KEYSLOT", key)
	slot, perr := strconv.Atoi(reply)
	if err != nil || perr != nil {
		c.t.Fatalf("servertest: CLUSTER KEYSLOT %q = %q, %v", key, reply, err)
	}
	for i := range c.masters {
		if lo, hi := slotRange(i, c.masters); slot >= lo && slot <= hi {
			return i
		}
	}
	c.t.Fatalf("servertest: slot %d of %q belongs to no master", slot, key)
	return -1
}

// Do sends one command to node i alone — no redirection is followed — and returns its reply as
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
