package pool_test

import "sync"

// events records the events of one kind an observer hears, for tests that read them back.
type events[T any] struct {
	mu  sync.Mutex
	got []T
}

func (e *events[T]) add(x T) {
	e.mu.Lock()
	e.got = append(e.got, x)
	e.mu.Unlock()
}

// list returns a copy of what was recorded, in order.
func (e *events[T]) list() []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]T(nil), e.got...)
}
