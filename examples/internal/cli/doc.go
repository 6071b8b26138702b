// Package cli is the command line every runnable example shares: a -h that says what the
// example shows and how it is run, its flags, an interrupt that cancels the run, and the exit
// status.
//
//	go run ./examples/NAME [flags] → cli.Main: parse (-h: the description) → run(ctx) → exit status
package cli
