// Package leakwatch checks what a runnable example prints for passwords: a Writer passes
// everything through while it counts the lines written and the lines holding one of the secrets
// it was given, so the example can say at the end that no password was printed, and its test can
// check that this is true.
//
//	example's output → leakwatch.Writer (counts lines, and lines with a secret) → stdout
package leakwatch
