package transport_test

import (
	"fmt"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// build makes a Transport from a mix of pool and transport options, the way most tests here set
// one up: a pool from the pool.Options (or the *pool.Pool given), then a transport over it from the
// transport.Options.
func build(opts ...any) (*transport.Transport, error) {
	var (
		p     *pool.Pool
		popts []pool.Option
		topts []transport.Option
	)
	for i, o := range opts {
		switch o := o.(type) {
		case pool.Option:
			popts = append(popts, o)
		case transport.Option:
			topts = append(topts, o)
		case *pool.Pool:
			p = o
		case nil:
		default:
			return nil, fmt.Errorf("build: option %d is a %T", i, o)
		}
	}
	if p == nil {
		var err error
		if p, err = pool.New(popts...); err != nil {
			return nil, err
		}
	} else if len(popts) > 0 {
		return nil, fmt.Errorf("build: pool options beside a pool")
	}
	return transport.New(p, topts...)
}
