// Package bench measures gatehouse's proxy against what it competes with,
// side by side in one run on one machine, and its agent gateway's cost per
// chat turn and isolation between users; it also holds the benchmark
// harness typed on small interfaces that the other packages' benchmarks
// share.
//
// # The suite
//
// `make bench` (go run ./bench/cmd/benchsuite -results bench/RESULTS.md)
// starts, each in its own process on loopback:
//
//   - the stub upstream (Upstream: a fasthttp server answering 1 KiB of
//     JSON to anything);
//   - the bare hop (BareHop: fasthttp server + keep-alive HostClient, no
//     auth, no header rewriting, the physical limit of one hop);
//   - nginx as a plain keep-alive reverse proxy (NginxConfig; installed
//     from Debian's packages by `make bench-deps`), a child process in the
//     foreground, killed at the end;
//   - a bare fasthttp handler answering a fixed body (the baseline of
//     POST /api/keys/validate);
//   - gatehouse, built from ./cmd/gatehouse and started with a temp data
//     dir, WAL with fsync, usage counting and the limiter on; the bootstrap
//     admin creates a user and 50,000 keys through the API and raises their
//     limits (Provision), so that nothing is refused. Cases: one hot key,
//     and the first 5,000 and all 50,000 keys in rotation (-keys);
//   - its peers, what a platform team would deploy instead, doing the same
//     work per request with the same keys and limits (peers.go, issue 25):
//     nginx + ngx_lua as Kong OSS works (key-auth and rate-limiting with
//     the local policy: the key's SHA-256 through LuaJIT's FFI, a
//     lua_shared_dict lookup, a fixed-hour counter) and HAProxy 2.6
//     (sha2(256), a map file, a stick table with http_req_rate(1h)), both
//     sending the key id upstream instead of the key and answering the
//     same five rate-limit headers; Debian's libnginx-mod-http-lua and
//     haproxy (`make bench-deps`). TestPeers checks that they do that
//     work (401s, 429 past the limit, the headers).
//
// It then loads each target with the same request bytes (Run: a closed
// loop over N keep-alive connections for a fixed time, latencies in a
// Histogram), in rounds with the targets interleaved so that a noisy
// moment hits them all, and one more time at one connection for latency
// without queueing. After each round's own measurement, wrk (Debian's,
// `make bench-deps`) loads the same target with the same request (a Lua
// script rotating its keys), to keep the suite's load generator honest.
// It prints a Markdown table (req/s, p50/p99/p999, the server's CPU per
// request from /proc — its processes' user + system time over the
// requests served, in the cheapest round —, the ratios to the bare hop and
// to nginx, wrk's req/s and ratio), a summary of each gatehouse case
// against the peers with as many keys (CPU per request and req/s as
// ratios to each), issue 25's targets checked, and appends it, dated, with the
// machine, its load average and the command, to bench/RESULTS.md. Flags: -conns, -duration,
// -rounds, -keys, -body, -vs (also gatehouse at a git revision), -results,
// -keep (keep the work dir and logs), -cases.
//
// The agent gateway's cases (issue 20) start gatehouse again, built from
// ./cmd/gatehouse (and from -vs REV beside it), with its agent gateway on
// loopback and the unauthenticated /metrics listener (StartGateway), an
// echo provider without its pause per word, and three users, each with an
// agent and a bound API key (AgentSuite):
//
//   - turn: sequential chat completions of one user (Turns), p50/p99/max
//     and, per turn, the WAL records written (from
//     gatehouse_wal_appended_records_total) and the registry asks made
//     (gatehouse_gateway_actor_asks_total, from the gateway's /metrics;
//     "—" for a -vs build without it);
//   - isolation: user "noisy" saves 3,000 memory entries of 200 words
//     (MemoryText), then user "quiet" is measured (GET /v1/agents in one
//     loop, a chat in another, one request at a time each) for 10 s
//     alone, and for 10 s beside "noisy" running 8 concurrent memory
//     searches (Isolation, QuietStats). The report checks issue 20's
//     target: p99 under 5 ms beside the neighbour, no failed chat;
//   - halves: /health on :8080 probed beside a burst of 1 MB chats
//     (halves.go; issue 35's target: p95 under 50 ms);
//   - chat: the chat path's throughput against an instant OpenAI-
//     compatible stub (an agent with its tools, durable traces), streamed
//     and not, at 1 and -conns connections: CPU per request, new upstream
//     connections per 1,000 calls, p50 added over the stub, beside a bare
//     forwarder (the chatfwd subcommand) as the floor (chat.go; issue 35).
//
// They are selected with -cases (proxy, isolation, turn, halves, chat; all by default)
// and sized with -entries, -searchers, -iso-duration and -turns. Their
// clients are net/http (latency is what they measure, not throughput);
// every request of the quiet user is counted, a failed or stuck one too.
// With -pin (2+ CPUs, taskset) the suite runs on CPU 0 and the gatehouses
// on CPU 1, so that the isolation case's latencies are the server's own.
//
// The load generator is built like wrk, to leave the servers as much of
// the shared CPU as it can: a few OS threads, each with its own epoll set
// of non-blocking sockets, answers parsed in place, nothing allocated per
// request. It only ever dials loopback addresses it is given.
//
// # Go benchmarks
//
//	go test ./bench -run '^$' -bench . -benchmem
//
// BenchmarkAuthorize* run the real actor system's Authorize through the
// Authorize harness (any Authorizer). BenchmarkProxyGatehouse and
// BenchmarkProxyBareHop run client, proxy and stub in one process, for a
// quick A/B; BenchmarkProxyProcess serves gatehouse's handler in the test
// process and loads it from child processes as the suite does, so that
// -cpuprofile gives the profile of gatehouse alone:
//
//	go test ./bench -run '^$' -bench 'ProxyProcess/hot' -benchtime 1x -cpuprofile cpu.prof
//	go tool pprof -top bench.test cpu.prof
//
// # Concurrency and ownership
//
// Run is safe to call from one goroutine at a time per Load; a Histogram
// is not safe for concurrent use (one per event loop, merged at the end).
// A Suite or an AgentSuite owns its child processes: Stop ends them, the
// last started first, and they get SIGTERM (Pdeathsig) if the suite dies.
package bench
