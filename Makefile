# The two commands a newcomer needs: `make demo` and `make test`.
GO ?= go

# Debian packages the integration tests exec or import: installed by `make test` when missing.
# wrk, Python's requests and Scrapy, and systemd (for systemd-analyze) are proxybreakerd's
# real clients and checks (issue 37).
APT_PACKAGES := tinyproxy squid redis-server prometheus chromium wrk python3-requests python3-scrapy systemd

.PHONY: demo test deps vet bench fuzz daemon

## demo: the main job — a self-contained demonstration on 127.0.0.1 (see examples/demo).
demo:
	$(GO) run ./examples/demo

## daemon: build proxybreakerd, one static binary (the SQLite driver, modernc.org/sqlite, is pure
## Go, so no cgo), into bin/proxybreakerd.
daemon:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/proxybreakerd ./cmd/proxybreakerd

## test: install what the tests need, then go vet and go test -race over every package.
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...
	cd bench && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 40m ./...

## deps: apt-get install the servers and clients the integration tests use, when they are missing
## (a package counts as present when dpkg has it installed).
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make: installing$$missing"; \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
	fi

## bench: the benchmarks quoted in the README (pipe through benchstat to summarise). Each line
## first checks that its benchmark exists in that package (a pattern that matches nothing would
## print PASS and measure nothing).
define bench_run
	@$(GO) test -list '^$(2)$$' $(1) | grep -qx '$(2)' || { echo "make bench: no $(2) in $(1)"; exit 1; }
	$(GO) test -run '^$$' -bench '$(3)' -benchmem $(4) $(1)
endef
bench:
	$(call bench_run,./pool,BenchmarkPick,^BenchmarkPick$$/^exits=(10|1000)/,-count 5)
	$(call bench_run,./pool,BenchmarkPick,^BenchmarkPick$$/^exits=100000/,-count 5 -benchtime 1000000x)
	$(call bench_run,./transport,BenchmarkMiddleware,^BenchmarkMiddleware$$,-count 6)
	$(call bench_run,./transport,BenchmarkLoopback,^BenchmarkLoopback$$,-count 6)
	$(call bench_run,./store,BenchmarkRequestPath,^BenchmarkRequestPath$$,-count 6)
	$(call bench_run,./store/redis,BenchmarkFleetRateLimit,^BenchmarkFleetRateLimit$$,-count 6)
	$(call bench_run,./otelbreaker,BenchmarkObserver,^BenchmarkObserver,-count 6)
	cd bench && $(GO) run ./cmd/benchall

## fuzz: run every fuzz target in the module for FUZZTIME (default 30s) each. The targets are
## found, not listed: `go test -list '^Fuzz'` in every package, so a new one cannot be missed;
## the run fails when it finds none.
FUZZTIME ?= 30s
fuzz:
	@set -e; n=0; \
	for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			n=$$((n+1)); echo "make fuzz: $$f in $$pkg"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done; \
	[ $$n -gt 0 ] || { echo "make fuzz: no fuzz target found"; exit 1; }; \
	echo "make fuzz: $$n targets fuzzed for $(FUZZTIME) each"
