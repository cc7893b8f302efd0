// Package accounts is gatehouse's accounts domain, an actors.Extension:
// users (email, role, plan, licence, an argon2id password hash sealed with
// the master key and bound to the user's id), login sessions (only the
// SHA-256 of a token is kept), login throttling and the bounded password
// hashing. One actor owns the state and serializes every change; password
// hashing runs in the caller's goroutine.
//
// Durability follows the engine's rules (actors.Extension): a change is
// appended (durable on return), applied with accountsState.apply, then
// answered; restore applies the same function to the snapshot section and
// to every later record. Every record is a full-state put or a delete, so
// replaying one the section already reflects changes nothing.
//
// Record types (on disk; never renumber):
//
//	2  user put        JSON userRecord, full state (sealed argon2id)
//	3  session put     JSON sessionRecord {hash of token, user, expiry}
//	4  session delete  32-byte SHA-256 of the token
//
// Snapshot section "accounts": uvarint len | users JSON (by id) | uvarint
// len | sessions JSON (by hash, ended ones left out): the bytes the
// snapshot payload held before it had named sections.
//
// The accounts need nothing of the keys. Creating a key needs the owner's
// limits, which KeyOwner derives from the user and the plans (Config);
// the keys count their owners' keys themselves. Other extensions that keep
// credentials of a user offer CredentialRevoker, which a change ending the
// user's sessions calls.
package accounts
