// Package serverproc runs a server binary as a child process on 127.0.0.1, for tests and the
// examples that need a real server: find the binary, pick a free port, write its config and start
// it in a directory of the caller's, wait until it is ready (or has exited), and kill, stop or
// restart it on the same port. It takes no testing.TB; package servertest adds the test rules
// (t.TempDir, skip or fail when a binary is missing, logs copied to a failed test's output).
//
//	servertest.StartTinyproxy / StartPrometheus / StartRedis ─┐
//	examples/fleet (its own redis-server)                     ├→ serverproc.Start(Spec)
//	                                                          │    → free 127.0.0.1 port → Spec.Args (config)
//	                                                          │    → exec Bin in Dir, output to Dir/Out
//	                                                          │    → poll Spec.Ready until ready or exited
//	                                                          └→ Process.Kill / Stop / Restart / Signal
//
// Redis returns the Spec of an empty, diskless redis-server, the one server both use.
package serverproc
