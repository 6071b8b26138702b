// Package exampletest holds what the runnable examples' own tests share: a run of the example
// into a buffer under a goroutine leak check that fails on any password printed (Output), and the
// check of its -h (CheckHelp).
//
//	examples/NAME's TestRun  → exampletest.Output(t, secrets, run) → the text the example printed
//	examples/NAME's TestHelp → exampletest.CheckHelp(t, the example's *cli.Command) → -h's text
package exampletest
