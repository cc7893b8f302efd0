// Package gateway is the agent gateway's durable state: gateway API keys,
// LLM providers, agents, and the record of every agent run (traces and
// token usage per agent, user and UTC day). It is an actors.Extension, so
// its state lives in actors and reaches disk through the same WAL and
// snapshots as the keys (record types 64..69, section "gateway").
//
// Usage:
//
//	gw, _ := gateway.New(gateway.DefaultConfig())
//	sys, _ := actors.New(cfg, actors.Deps{..., Extensions: []actors.Extension{gw}})
//	k, raw, _ := gw.CreateAPIKey(ctx, gateway.NewAPIKey{Name: "ci", Scopes: []gateway.Scope{gateway.ScopeWrite}})
//	auth, err := gw.Authenticate(ctx, []byte(raw)) // the hot path
//	p, _ := gw.CreateProvider(ctx, gateway.ProviderInput{Name: "echo", ProviderType: gateway.ProviderEcho, Enabled: true})
//	a, _ := gw.CreateAgent(ctx, "alice", gateway.AgentInput{AgentKey: &key, Provider: &p.Name, Model: &model})
//	gw.RecordRun(gateway.Trace{...})
//
// Actors and ownership:
//   - KeyShards key-shard actors own the API keys, each the keys whose
//     SHA-256 maps to it; Authenticate sends a pooled message with a
//     buffered reply channel and waits on it, ctx, or the System watchdog.
//     The raw key is never stored: only its hash and a masked preview.
//   - One registry actor owns providers and agents (light control-plane
//     traffic). Provider credentials are sealed with the System's Sealer
//     (AES-256-GCM, bound to the provider id) in the caller's goroutine;
//     the WAL, snapshots and logs only ever see the sealed form.
//   - One runs actor owns traces (the newest Config.MaxTraces, default
//     10,000) and usage rows (Config.UsageDays days back from the newest
//     recorded day, default 400). A run is appended with AppendAsync and
//     applied on its commit notice; the runs section carries a WAL
//     watermark, so replay after a snapshot never counts a run twice.
//
// Every control-plane change is validated by its actor, appended (durable
// on return), applied, then answered. Records are full-state upserts or
// deletes, so replaying one the snapshot already reflects is harmless.
// All Gateway methods are safe for concurrent use after Start.
package gateway
