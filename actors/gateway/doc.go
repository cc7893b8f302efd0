// Package gateway is the agent gateway's durable state: gateway API keys,
// LLM providers, agents, sessions, channel instances, the activity log,
// and the record of every agent run (traces, and usage per UTC hour,
// agent, user, provider and model). It is an actors.Extension, so
// its state lives in actors and reaches disk through the same WAL and
// snapshots as the keys (record types 64..75, section "gateway").
//
// Usage:
//
//	gw, _ := gateway.New(gateway.DefaultConfig())
//	sys, _ := actors.New(cfg, actors.Deps{...}, ks, acc, gw)
//	k, raw, _ := gw.CreateAPIKey(ctx, gateway.NewAPIKey{Name: "ci", Scopes: []gateway.Scope{gateway.ScopeWrite}})
//	auth, err := gw.Authenticate(ctx, []byte(raw)) // the hot path
//	p, _ := gw.CreateProvider(ctx, gateway.ProviderInput{Name: "echo", ProviderType: gateway.ProviderEcho, Enabled: true})
//	a, _ := gw.CreateAgent(ctx, "alice", gateway.AgentInput{AgentKey: &key, Provider: &p.Name, Model: &model})
//	gw.RecordRun(gateway.Trace{...})
//
// # Actors and ownership
//
//   - KeyShards key-shard actors own the API keys, each the keys whose
//     SHA-256 maps to it. A new key's id is drawn so that it maps to the
//     same shard, so revocation (by id) reaches that one shard; keys from
//     older data dirs, or restored under another KeyShards, are found
//     through a table of exceptions built at restore. Authenticate sends a
//     pooled message with a buffered reply channel and waits on it, ctx, or
//     the System watchdog. The raw key is never stored: only its hash and a
//     masked preview.
//   - One registry actor owns the low-volume, cross-referenced
//     configuration: providers, agents and their shares, user files,
//     channel instances, custom tools, MCP servers, grants and access
//     requests, media, skills, delegations (one actor keeps checks such
//     as "still in use" atomic). It is the one writer of its part; every
//     operation is a closure sent to it (call), never a message type of
//     its own. After each change it publishes an immutable view of its
//     part (copy-on-write tables: a write copies only the table it
//     changes), before the change's caller is answered; every get, list
//     and search (read) runs on that view in the caller's goroutine, so
//     reads never wait behind a write's fsync or another tenant's work.
//     A read gets a regView, which has no commit: a write from a read
//     does not compile. A run plans from one such read (PlanRun, plan.go).
//     Provider credentials are sealed with the System's Sealer
//     (AES-256-GCM, bound to the provider id) in the caller's goroutine;
//     the WAL, snapshots and logs only ever see the sealed form.
//   - Config.TenantShards tenant shard actors (tenants.go, default 16)
//     own the high-rate, per-tenant kinds: a session (and its turns, which
//     the shard serializes) on the shard of its key, a memory entry on the
//     shard of its user, with an inverted index kept as entries come and
//     go, so a search costs its terms' postings. One user's searches or
//     one busy session occupy one shard. Shards read agents from the
//     registry's view, never by asking it. Deleting an agent is the
//     registry's write, then each shard's purge of the agent's sessions
//     and memory; a shard refuses new ones once the view lacks the agent,
//     and a crash between the two is finished at the next start.
//   - One runs actor owns traces (the newest Config.MaxTraces, default
//     10,000, none older than Config.TraceDays before the newest run) and
//     hourly usage rows (Config.UsageDays days back from the newest run's
//     day, default 400). Runs are gathered for up to 10 ms (runLinger),
//     appended together with one AppendAsync (one record each, one
//     commit) and applied on their commit notice; the runs part carries
//     a WAL watermark, so replay after a snapshot never counts a run
//     twice. After each commit it publishes the traces, which trace
//     queries read in their caller's goroutine.
//
// # State and apply
//
// state (state.go) is the whole durable state, partitioned by owning
// actor: one keyPart per key shard, the registryPart, the runState. Each
// part's apply is pure and deterministic and is the only code that changes
// durable state, derived indexes included (hash → key, key id → shard,
// provider name → id, agent_key → id, agents per provider). An actor
// validates, builds the event, appends it (commit: durable on return),
// applies it to its part and answers. Restore applies the snapshot's
// entities and then the WAL's records through state.apply, which routes
// each event to the part that owns it, so live changes and replay run the
// same code. Applied entities are immutable: an update applies a new one.
// Replay is exact (the rule on actors.Extension, checked for every record
// type by actorstest.Conformance (conformance_test.go), and with snapshots taken while writes run by
// the property tests): a section may reflect records after its barrier,
// because the System captures it while actors keep committing. Entity
// records carry full state or a delete, so re-applying them in order ends
// in the same state; the records that add to a state carry a watermark:
// a session holds the index of the last record applied to it (seq) and
// skips turns and saves at or below it, the runs part skips runs at or
// below its seq.
//
// # Cluster mode
//
// Every node follows one replicated log; ApplyLive (actors.LiveApplier,
// live.go) takes a record another node wrote, routes it by the rule replay
// uses (route: a key to the key shard of its hash, a session or memory
// entry to the tenant shard of its user, a delete or turn naming only an
// id to the tenant shard holding it, audit entries to the owner of what
// they are about, runs to the runs actor, the rest to the registry) and
// waits until that actor applied it with its part's apply and republished
// its view (registry, traces). It appends nothing and calls nothing out;
// what derives from the state follows lazily as after a restart (an MCP
// server's pooled connection reopens on its next use when its UpdatedAt
// moved). Watermarks work as on replay (a session's seq skips a turn it
// holds), but for runs: a node's own runs and the other nodes' reach the
// runs actor interleaved, so the foreign ones have their own watermark
// (runState.live) and the own ones, applied once by their commit notice,
// none. Because own records apply at commit and foreign ones when they
// arrive, two nodes writing one entity at about the same time would each
// end with the other's write; a part that gets foreign records keeps the
// seq of its actor's latest write per entity until the log passes it
// (liveMarks) and skips an older foreign record of it, so every node ends
// with the newest, as replay does. Traces are listed in the order the
// node applied the runs (its own first), so two nodes may list runs
// logged within the same millisecond in another order; usage and
// instances (created_at: the earliest run) are equal. A delete or a turn
// of an entity this node does not hold changes nothing; a record that
// does not decode is ErrCorrupt (a delete of an audit entry or a
// delegation, kinds that only age out, is).
//
// # Record types
//
// The payload of every record is JSON. A record type's layout never
// changes: a new layout gets a new type number, and the old number keeps
// its decoder. An entity kind's data carries its own version ("v"), so a
// kind's layout can change without a new record type.
//
//	type  name              payload                                      applied by
//	  64  api key put       apiKeyRec JSON (legacy: decoded, not written) key shard of its hash
//	  65  provider put      providerRec JSON, credential sealed (legacy)  registry
//	  66  provider delete   16-byte provider id (legacy)                 registry
//	  67  agent put         agentRec JSON (legacy)                       registry
//	  68  agent delete      16-byte agent id (legacy)                    registry
//	  69  run recorded      runRec JSON without "v" (legacy)             runs actor
//	  70  entitySaved       {"kind", "v", "data": full entity}           owner of kind (kinds in records.go)
//	  71  entityDeleted     {"kind", "id"}                               owner of kind
//	  72  runRecorded       {"v": 1, run fields, "spans"}                runs actor
//	                        (later, optional: provider_type; per span
//	                        provider_type, attempt, cache_read_tokens,
//	                        cache_write_tokens, reasoning_tokens)
//	  73  sessionTurn       {"v": 1, session_id, messages, tokens, at}   tenant shard of the session
//	  74  budgetReserved    {"v", budget_id, reservation_id, period,     tenant shard of the budget id
//	                        nano, tokens, at, node?, after?}: a node's
//	                        allowance on a budget, held before a call
//	                        spends from it (cluster: void if the ledger
//	                        took a hold after "after")
//	  75  budgetSettled     {"v", budget_id, reservation_id, nano,       tenant shard of the budget id
//	                        tokens, keep_nano?, keep_tokens?, by?,
//	                        interrupted?}: what the hold's calls cost since
//	                        its last settlement and what it keeps (v2; v1
//	                        ends it); a hold of the node at a restart
//	                        settles at its full amount, once
//
// Entity kinds (records 70 and 71, snapshot entities): "api_key" (data v1:
// id, name, preview, hash, scopes, created_at, expires_at, revoked_at;
// revoking saves the key with revoked_at), "provider" (v1: id, name,
// display_name, provider_type, api_base, api_key_sealed, api_key_hint,
// enabled, settings, created_at, updated_at; later, optional: the key
// pool api_keys_sealed and api_keys_hint), "agent" (v1: id, agent_key,
// display_name, owner_id, provider_id, model, system_prompt, status,
// timeout_seconds, shared_with, created_at, updated_at; later, optional:
// operators, user_id on keys, description, summon_error,
// max_tool_iterations, is_default, fallbacks [{provider_id, model}],
// max_tokens), "user_file" (v1: a user's USER.md for
// an agent; id derived from agent, user, name), "session" (v1: key, agent,
// user, channel, label, bounded messages, token counts, later optional:
// seq, the watermark; its turns are record 73; owned by the tenant shard
// of its key), "channel_instance" (v1: name, type, agent, canonical config,
// credentials sealed and masked), "activity" (v1: an audit entry, saved in
// the same append as the change it records by the actor making it, see
// activity.go; owned by the key shard for API-key entries, by the tenant
// shard its optional "tenant" routing key names, the registry otherwise);
// "memory" is owned by the tenant shard of its user, every other kind by
// the registry. Data v1 uses the names of the legacy records, which is why
// 64, 65 and 67 decode as v1; fields added to a v1 layout are optional and
// absent means their zero value.
// Every type and kind has a golden file in testdata/ (go test -update
// rewrites them; the legacy_* files never change).
//
// The snapshot section is {"version": 3, "entities": [entitySaved
// payloads sorted by kind, then id], "runs": {"seq", "traces", "usage"
// (hourly rows), "instances"}}; version 2 (day usage rows) and version 1
// (the API types' JSON) are still read.
//
// All Gateway methods are safe for concurrent use after Start.
package gateway
