// Package control is the key service's automation domain: access tokens
// for the management API (svc_pat_…), the proxied services managed through
// the API, and the per-key service lists that limit a key to some
// services. It is an actors.Extension: its state lives in one actor (the
// one writer), every change is a WAL record (types 200-201, full-state
// upserts and deletes, so replay is exact by nature) and the whole state
// is a section of every snapshot.
//
// Readers on the proxy's hot path (the service table, a key's service
// list) never message the actor: after each change the actor publishes a
// frozen View through an atomic pointer, and calls the subscribers (the
// HTTP server rebuilds its upstream table from it before the change is
// acknowledged).
//
// In cluster mode (actors.LiveApplier) ApplyLive hands a record another
// node wrote to the actor, which applies it with the same apply as its own
// commits and publishes the View (subscribers called) before ApplyLive
// returns; nothing is appended. A token deleted there forgets this node's
// use of it not yet durable. A foreign record older than this node's own
// latest write of the same entity is skipped (liveMarks), so a token
// revoked here does not come back with another node's save of its last
// use.
//
// A token minted with a token keeps it as its parent: it expires no later
// than the parent, revoking a token revokes its lineage in one write, and
// a token works only while every token up its chain does (so a child
// minted on one node while another revokes its parent still ends). The
// user's whole set goes with their sessions (RevokeUserTokens, called by
// actors.System through actors.CredentialRevoker). Bad tokens are
// throttled per client IP; a valid token is looked up first and passes.
//
// Secrets: a token is kept as its SHA-256 only; a service's header values
// (upstream credentials) are sealed with the master key, bound to the
// service and header names, in the WAL and snapshots, and opened only into
// the in-memory View.
package control
