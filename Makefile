# The two commands a newcomer needs: `make demo` and `make test`.
GO ?= go

# Debian packages the integration tests exec: installed by `make test` when missing.
APT_PACKAGES := tinyproxy squid redis-server prometheus chromium

.PHONY: demo test deps vet bench fuzz

## demo: the main job — a self-contained demonstration on 127.0.0.1 (see examples/demo).
demo:
	$(GO) run ./examples/demo

## test: install what the tests need, then go vet and go test -race over every package.
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...
	cd bench && $(GO) vet ./... && $(GO) test -race -count=1 ./...

## deps: apt-get install the servers the integration tests start, when they are missing.
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
		command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || [ -x /usr/bin/$$p ] || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make: installing$$missing"; \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
	fi

## bench: the benchmarks quoted in the README (pipe through benchstat to summarise).
bench:
	$(GO) test -run '^$$' -bench '^BenchmarkPick$$/^exits=(10|1000)$$/' -benchmem -count 5 ./transport
	$(GO) test -run '^$$' -bench '^BenchmarkPick$$/^exits=100000$$/' -benchmem -count 5 -benchtime 1000000x ./transport
	$(GO) test -run '^$$' -bench '^Benchmark(Middleware|Loopback)$$' -benchmem -count 6 ./transport
	$(GO) test -run '^$$' -bench '^BenchmarkRequestPath$$' -benchmem -count 6 ./store
	$(GO) test -run '^$$' -bench '^BenchmarkFleetRateLimit$$' -benchmem -count 6 ./store/redis
	$(GO) test -run '^$$' -bench '^BenchmarkObserver' -benchmem -count 6 ./otelbreaker
	cd bench && $(GO) run ./cmd/benchall

## fuzz: run each fuzz target for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime $(FUZZTIME) ./transport
	$(GO) test -run '^$$' -fuzz '^FuzzReadExits$$' -fuzztime $(FUZZTIME) ./transport
	$(GO) test -run '^$$' -fuzz '^FuzzClassify$$' -fuzztime $(FUZZTIME) ./transport
	$(GO) test -run '^$$' -fuzz '^FuzzSettings$$' -fuzztime $(FUZZTIME) ./breaker
	$(GO) test -run '^$$' -fuzz '^FuzzSOCKSWatch$$' -fuzztime $(FUZZTIME) ./transport
	$(GO) test -run '^$$' -fuzz '^FuzzParseBasic$$' -fuzztime $(FUZZTIME) ./internal/proxytest
	$(GO) test -run '^$$' -fuzz '^FuzzReadSOCKSRequest$$' -fuzztime $(FUZZTIME) ./internal/proxytest
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./store/redis
	$(GO) test -run '^$$' -fuzz '^FuzzReadTargets$$' -fuzztime $(FUZZTIME) ./probe
	$(GO) test -run '^$$' -fuzz '^FuzzNegotiation$$' -fuzztime $(FUZZTIME) ./statuspage
