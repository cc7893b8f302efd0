# gatehouse — see README.md. Every target works on a fresh machine with only Go.
GO        ?= go
BIN       := bin/gatehouse
PKGS      := ./...
DATA_DIR  ?= ./data

OPENAI_CLIENT := cmd/gatehouse/testdata/openaiclient

# The version and commit `gatehouse version` prints, stamped at link time
# so that a build without VCS data (-buildvcs=false, a tarball) has them.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run test test-deps test-debs test-crash fuzz bench bench-agents bench-deps bench-go bench-cluster bench-budgets verify fix clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gatehouse

# need_debs: for each <command>:<Debian package> pair of $(1) whose command
# is missing (a command given as an absolute path is a file that must
# exist: a library or module), apt-get installs the package, only as root and only where
# apt-get exists (Debian, Ubuntu). Otherwise it names what is missing and
# goes on (the tests that need it skip), or fails when CI=true. $(2) says
# what needs them.
define need_debs
	@missing=; pkgs=; \
	for pair in $(1); do cmd=$${pair%%:*}; pkg=$${pair#*:}; \
		command -v $$cmd >/dev/null 2>&1 || [ -x /usr/sbin/$$cmd ] || { [ "$${cmd#/}" != "$$cmd" ] && [ -e "$$cmd" ]; } || { missing="$$missing $$cmd"; pkgs="$$pkgs $$pkg"; }; \
	done; \
	if [ -z "$$missing" ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$pkgs; \
	elif [ "$$CI" = true ]; then \
		echo "missing:$$missing (Debian packages:$$pkgs), needed by $(2); not installed (not root, or no apt-get): install them" >&2; exit 1; \
	else \
		echo "missing:$$missing (Debian packages:$$pkgs), needed by $(2); not installed (not root, or no apt-get): going on without them (what needs them skips, and fails when CI=true)"; \
	fi
endef

## run: start the server on embedded defaults (data under ./data);
## CONFIG=file.json takes a config, DEMO=1 adds the demo service "echo"
run: build
	./$(BIN) serve --data-dir $(DATA_DIR) $(if $(CONFIG),--config $(CONFIG)) $(if $(DEMO),--demo-echo)

## test: every test, with the race detector. The cluster tests (real etcd
## members, lease timing: actors/cluster, actors/clusterit, wal/etcdlog) run after the
## others rather than beside them.
test: test-deps gw-test-deps web-test-deps api-test-deps bench-deps
	GOTRACEBACK=all $(GO) test -race -timeout=600s -count=1 $$($(GO) list $(PKGS) | grep -v -e '/actors/cluster' -e '/wal/etcdlog')
	GOTRACEBACK=all $(GO) test -race -timeout=600s -count=1 ./actors/cluster/... ./actors/clusterit ./wal/etcdlog

## test-deps: the pinned openai npm client for TestOpenAIClient (cmd/gatehouse)
## and test-debs. Without them those tests skip, and fail under CI=true.
test-deps: test-debs
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(OPENAI_CLIENT) --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: TestOpenAIClient will skip (and fail when CI=true)"; \
	fi

## test-debs: the tools the README's walk-through uses for TestREADME (curl,
## jq, zip, openssl), bubblewrap (bwrap), the sandbox custom tools and
## stdio MCP servers run in, and prlimit (util-linux), which runs the fd-limit
## tests' server under a low RLIMIT_NOFILE, from Debian's packages when
## missing (need_debs).
test-debs:
	$(call need_debs,curl:curl jq:jq zip:zip openssl:openssl bwrap:bubblewrap prlimit:util-linux,TestREADME and the sandbox and fd-limit tests)

## api-test-deps: the pinned client generator (openapi-typescript,
## openapi-fetch, typescript) for TestGeneratedClientWalkthrough
## (httpapi); without npm it skips (and fails when CI=true).
API_CLIENT := httpapi/testdata/apiclient
.PHONY: api-test-deps
api-test-deps:
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(API_CLIENT) --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: TestGeneratedClientWalkthrough will skip (and fail when CI=true)"; \
	fi

## test-crash: the crash tests, 20 times in a row
test-crash:
	$(GO) test -race -run 'Crash' -count=20 -timeout=1800s ./wal ./snapshot ./actors/gateway/blob ./cmd/gatehouse

## fuzz: a minute on each fuzz target
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzDecodeRecord -fuzztime=60s ./wal
	$(GO) test -run='^$$' -fuzz=FuzzWindow -fuzztime=60s ./actors/ratelimit
	$(GO) test -run='^$$' -fuzz=FuzzBucket -fuzztime=60s ./actors/ratelimit
	$(GO) test -run='^$$' -fuzz=FuzzDecodeKeyEvent -fuzztime=60s ./actors
	$(GO) test -run='^$$' -fuzz=FuzzDecodeImage -fuzztime=60s ./actors
	$(GO) test -run='^$$' -fuzz=FuzzDecodeEvent -fuzztime=60s ./actors/gateway
	$(GO) test -run='^$$' -fuzz=FuzzParseRef -fuzztime=60s ./actors/gateway/blob
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=60s ./snapshot
	$(GO) test -run='^$$' -fuzz=FuzzParseProxyPath -fuzztime=60s ./httpapi
	$(GO) test -run='^$$' -fuzz=FuzzParseLang -fuzztime=60s ./httpapi/gateway
	$(GO) test -run='^$$' -fuzz=FuzzMsgContent -fuzztime=60s ./httpapi/gateway
	$(GO) test -run='^$$' -fuzz=FuzzAPIRequests -fuzztime=60s ./httpapi
	$(GO) test -run='^$$' -fuzz=FuzzGatewayRequests -fuzztime=60s ./httpapi/gateway
	$(GO) test -run='^$$' -fuzz=FuzzParseSkillZip -fuzztime=60s ./actors/gateway
	$(GO) test -run='^$$' -fuzz=FuzzDecodeQuota -fuzztime=60s ./actors/cluster
	$(GO) test -run='^$$' -fuzz=FuzzWire -fuzztime=60s ./actors/cluster/transport
	$(GO) test -run='^$$' -fuzz=FuzzDecodeBatch -fuzztime=60s ./wal/etcdlog
	$(GO) test -run='^$$' -fuzz=FuzzAuthenticatedDecoders -fuzztime=60s ./wal/etcdlog
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=60s ./actors/control

## bench: every case of the suite, printed and appended to bench/RESULTS.md:
## the side-by-side proxy table (upstream direct, bare fasthttp hop, nginx,
## gatehouse, and its peers nginx+Lua and HAProxy doing key auth + limit;
## bench-deps installs them, TestPeers in make test checks them), the agent
## gateway's turn cost and its noisy-neighbour isolation
bench: bench-deps
	$(GO) run ./bench/cmd/benchsuite -results bench/RESULTS.md

## bench-agents: the agent gateway's cases only (turn, isolation, halves, chat); no nginx or wrk
bench-agents:
	$(GO) run ./bench/cmd/benchsuite -cases isolation,turn,halves,chat -results bench/RESULTS.md

## bench-deps: nginx (with ngx_lua), HAProxy and wrk from Debian's packages,
## for the bench, when missing (need_debs: apt only as root; otherwise a
## message, an error under CI=true)
bench-deps:
	$(call need_debs,nginx:nginx /usr/lib/nginx/modules/ngx_http_lua_module.so:libnginx-mod-http-lua haproxy:haproxy wrk:wrk,the bench's peers (nginx+Lua, HAProxy) and wrk)

## bench-cluster: cluster mode's rows (issue 22): admissions on a single
## node, on a key's owner and forwarded, side by side; proxied requests on
## real processes, to the owner and forwarded; a chat turn with and
## without a budget made on another node (issue 34)
bench-cluster:
	$(GO) test -run='^$$' -bench=Admit -benchtime=300000x -count=3 ./actors/clusterit
	$(GO) test -run='^$$' -bench=ClusterProxy -benchtime=3000x -count=3 ./cmd/gatehouse
	$(GO) test -run='^$$' -bench=ClusterBudgetTurn -benchtime=3000x -count=2 ./cmd/gatehouse

## bench-budgets: a chat turn's CPU with and without budgets, side by side (issue 34)
bench-budgets:
	$(GO) test -run='^$$' -bench=BenchmarkChatTurnBudgets -benchtime=8000x -count=8 ./httpapi/gateway

## bench-go: every Go benchmark, into bench/latest.txt
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout=3600s $(PKGS) | tee bench/latest.txt

verify:
	$(GO) vet $(PKGS)
	$(GO) mod tidy -diff
	test -z "$$(gofmt -l .)"

fix:
	gofmt -w .
	$(GO) mod tidy

clean:
	rm -rf bin

# --- browser assets and browser tests ---
GW_CLIENT   := httpapi/gateway/testdata/gwclient
CONSOLE_DRV := cmd/gatehouse/testdata/console
# <npm project>:<embedded directory>: the vendored browser libraries (each
# project's vendor.txt lists the files), committed so a plain `go build`
# carries them.
WEB_ASSETS  := httpapi/console/testdata/npm:httpapi/console/web \
               httpapi/gateway/testdata/docsui-src:httpapi/gateway/docsui

.PHONY: web-assets web-test-deps gw-test-deps chromium

## web-assets: re-vendor the console's chart library (uplot) and the /docs
## viewer (swagger-ui-dist) from their pinned npm packages; commit the result
web-assets:
	@for pair in $(WEB_ASSETS); do \
		src=$${pair%%:*}; dst=$${pair#*:}; \
		npm ci --prefix $$src --no-audit --no-fund --loglevel=error || exit 1; \
		grep -v '^#' $$src/vendor.txt | while read -r from to; do \
			[ -n "$$from" ] || continue; \
			mkdir -p "$$(dirname $$dst/$$to)" && cp $$src/$$from $$dst/$$to && echo "vendored $$dst/$$to"; \
		done; \
	done

## web-test-deps: the pinned npm projects TestVendoredAssets compares the
## committed assets with, and puppeteer-core for the console's browser tests
## (TestConsoleInChromium, TestConsoleGatewayInChromium)
web-test-deps: chromium
	@if command -v npm >/dev/null 2>&1; then \
		for pair in $(WEB_ASSETS); do npm ci --prefix $${pair%%:*} --no-audit --no-fund --loglevel=error || exit 1; done; \
		npm ci --prefix $(CONSOLE_DRV) --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: the vendored-asset and console browser tests will skip (and fail when CI=true)"; \
	fi

## gw-test-deps: the openai client and the OpenAPI validator for the
## gateway's tests in httpapi/gateway (they skip without them, and fail when CI=true).
gw-test-deps: chromium
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(GW_CLIENT) --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: the gateway's node tests will skip (and fail when CI=true)"; \
	fi

## chromium: Debian's chromium for the browser tests, only when missing
chromium:
	$(call need_debs,chromium:chromium,the browser tests)
