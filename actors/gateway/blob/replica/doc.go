// Package replica makes a node's blob store (package blob) a cluster's:
// in cluster mode the bytes of every upload (skill ZIPs, media) are on two
// nodes before the upload is acknowledged, and a node that lacks a blob a
// record names fetches it by its ref from the others.
//
// # Put: two copies before the acknowledgement
//
// Store.Put writes the bytes through the local blob.Store (durable here,
// held until Release, as blob.Store.Put), then asks one other live member
// to take a copy: a "copy" request names the ref, the size and this node's
// transport address, and the member pulls the bytes from this node in
// chunks of 256 KiB (request/response messages over the cluster transport),
// writes them through its own blob.Store.PutRef, which verifies their
// SHA-256 and fsyncs them, and answers. A node pulls only from current
// members: a copy request naming an address that is not a live member's
// is refused (ErrNotMember) and nothing is fetched (a member that has not
// heard of a node just joined yet refuses its copies: the uploader asks
// the next member). Members are asked one at a time, in rendezvous order of the ref (the same order a fetch tries), each first
// probed with a request bounded by Config.CallTimeout (so a member down
// costs that, not the whole push), until one answers yes within
// Config.PushTimeout (and the caller's context). If
// none does, or no other member is alive, Put releases its hold and
// returns an error wrapping blob.ErrUnavailable: the caller appends no
// record, so nothing is acknowledged or recorded (the local copy is
// unnamed and goes at a collection). A cluster of one node therefore
// takes no uploads (docs/decisions.md says why).
//
// # Open: fetch what is missing
//
// Store.Open opens the local copy. If there is none (blob.ErrNotFound) it
// fetches the blob from the other live members, in the same rendezvous
// order: each chunk is asked for in turn, and the bytes go through the
// local blob.Store.PutRef, so a copy whose bytes do not hash to the ref
// (a damaged peer copy) is refused, counted, logged and the next member
// tried. Then it opens the local copy. Opens of the same missing blob
// while a fetch runs wait for that fetch (one fetch per ref at a time),
// bounded by their context. If every member answered that it lacks the
// blob, Open returns blob.ErrNotFound; if some could not be asked (down,
// timed out), an error wrapping blob.ErrUnavailable. A node serves chunks
// from its local copies only: a fetch never chains to a third node.
//
// # Collection (blob's holds and stamps)
//
// Put keeps the blob package's rule unchanged for the uploading node: the
// blob is held until the caller Releases it after appending the record.
// A copy pulled in for another node's upload is released as soon as it is
// durable here, before the uploader appends the record naming it; so that
// a snapshot whose cut falls between the two does not collect it, Collect
// also keeps every blob pulled in less than Config.CopyGrace (10 minutes)
// before its Cut was taken. The uploader appends the record before its
// upload answers, within its request timeout of the copy, far less than
// the grace: a cut taken later comes after the append, so the snapshot's
// state names the blob (or the upload failed, and the copy is rightly
// collected). A blob fetched for Open is named by a record applied
// already. Cluster mode takes no snapshots yet, so no collection runs; the
// rule is for when it does.
//
// # Logging and metrics
//
// Logs, with component=blob-replica: a member that failed a copy or a
// fetch (Warn, with the ref, the member and the error), an upload refused
// for want of a second copy (Warn), a copy refused because the address it
// names is not a member's (Warn), a fetch that found the blob (Info).
// Refs are SHA-256 hashes, never secrets; blob bytes are never logged.
// Metrics on Config.Registerer: gatehouse_blob_replica_pushes_total{result
// ="ok"|"failed"} (Puts), gatehouse_blob_replica_fetches_total{result="ok"
// |"not_found"|"failed"|"refused"} (Opens that missed, copies pulled or
// refused), gatehouse_blob_replica_peer
// _failures_total{op="push"|"fetch",reason="corrupt"|"error"} (each member
// that failed), gatehouse_blob_replica_bytes_total{direction="in"|"out"}
// (chunk bytes received and served).
package replica
