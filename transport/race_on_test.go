//go:build race

package transport_test

// raceDetector reports whether the tests run under the race detector, whose bookkeeping allocates
// now and then on paths that allocate nothing without it.
const raceDetector = true
