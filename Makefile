# gatehouse — see README.md. Every target works on a fresh machine with only Go.
GO        ?= go
BIN       := bin/gatehouse
PKGS      := ./...
DATA_DIR  ?= ./data

.PHONY: all build run test test-crash fuzz bench verify fix clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gatehouse

## run: start the server on embedded defaults (data under ./data)
run: build
	./$(BIN) serve --data-dir $(DATA_DIR)

## test: every test, with the race detector
test:
	GOTRACEBACK=all $(GO) test -race -timeout=600s -count=1 $(PKGS)

## test-crash: the crash tests, 20 times in a row
test-crash:
	$(GO) test -race -run 'Crash' -count=20 -timeout=1800s ./wal ./snapshot ./cmd/gatehouse

## fuzz: a minute on each fuzz target
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzDecodeRecord -fuzztime=60s ./wal
	$(GO) test -run='^$$' -fuzz=FuzzWindow -fuzztime=60s ./actors/ratelimit
	$(GO) test -run='^$$' -fuzz=FuzzBucket -fuzztime=60s ./actors/ratelimit
	$(GO) test -run='^$$' -fuzz=FuzzDecodeKeyEvent -fuzztime=60s ./actors
	$(GO) test -run='^$$' -fuzz=FuzzParseProxyPath -fuzztime=60s ./httpapi

## bench: Go benchmarks and the bench/ suite; results in bench/latest.txt
bench:
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
