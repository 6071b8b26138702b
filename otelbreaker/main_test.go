package otelbreaker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The observer starts no goroutine; the tests' transports, proxies and servers stop theirs.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
