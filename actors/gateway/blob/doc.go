// Package blob stores the bytes that do not belong in the WAL (skill ZIPs of
// up to 20 MiB, media, agent workspace files) as immutable files named by
// their SHA-256. A WAL record that uses a blob carries only its Ref (and,
// if the resource needs it, the size Put returned).
//
// # Usage
//
//	st, err := blob.New(blob.Config{Dir: filepath.Join(dataDir, "blobs")}, lg, reg)
//	ref, size, err := st.Put(body, 20<<20)       // durable on return; ErrTooLarge beyond 20 MiB
//	_, err = log.Append(recordNaming(ref, size)) // then the record naming it
//	st.Release(ref)                              // after the append (or its certain failure)
//	rc, err := st.Open(ref)                      // ErrNotFound; ErrCorrupt at the end if damaged
//	cut := st.Cut()                              // before a snapshot's barrier, then once it is saved:
//	removed, err := st.Collect(cut, func(r blob.Ref) bool { return named[r] })
//
// PutRef stores bytes whose ref the caller knows already (a copy from
// another node) and refuses them, storing nothing, if they hash to another
// one; Reader.ReadAt serves a range without verifying it (to a node that
// verifies the whole copy itself). In cluster mode the gateway uses this
// Store through package replica, which keeps every Put on a second node
// and fetches a blob missing here; the rules below hold on each node.
//
// # Directory layout
//
//	<dir>/sha256/ab/cdef…   the blob whose SHA-256 is abcdef…: 64 lowercase hex
//	                        characters, the first two naming one of 256 fan-out
//	                        directories 00..ff, the other 62 the file
//	<dir>/tmp/put-*         a Put in progress; New removes them all (a crash
//	                        left them)
//
// A blob file holds the bytes, nothing else: no header, no checksum besides
// its name. Files are mode 0600 and directories 0700. New creates <dir>,
// tmp/ and sha256/ and syncs the parent of each directory it creates; the
// first Put into a fan-out directory creates it. Other names under sha256/
// are ignored (never read, never collected), and fan-out directories are
// never removed. The temp directory is inside <dir> so that the rename
// stays within one file system.
//
// # Durability
//
// Put streams its input into a temp file while hashing it, at most the
// limit it is given (more: ErrTooLarge, and the temp file is removed). Then,
// in this order:
//
//  1. the first time this Store uses a fan-out directory: create it if
//     missing, then fsync sha256/ (New also fsyncs sha256/ once, for the
//     fan-out directories a previous process created);
//  2. fsync the temp file, then close it;
//  3. rename it to its address (atomic: a name under sha256/ only ever
//     denotes complete, synced bytes);
//  4. fsync the fan-out directory, which makes the name durable;
//  5. return the Ref.
//
// The caller appends the WAL record naming the blob only after Put
// returned, so the blob is durable before any record names it: a crash can
// leave a blob no record names (collected later) or a temp file (removed by
// New), never a record naming a missing blob.
//
// Putting bytes that are stored already replaces nothing: once the input is
// hashed, the stored copy is checked (size, then hash) and the temp file is
// dropped unsynced; steps 1 and 4 still run, because the Put that
// installed the copy may be between its steps 3 and 4, or its process may
// have crashed there. A damaged stored copy is replaced by steps 2-4.
//
// # Reading
//
// Blobs are verified as they are read, not when the store opens: a Reader
// hashes what it returns and, at the end, returns io.EOF only if the bytes
// hash to the Ref, and an error wrapping ErrCorrupt otherwise (bit rot,
// truncation, appended bytes). Verify checks a whole blob before use. A
// missing blob is ErrNotFound. Neither ever panics, and ParseRef never does
// on any input.
//
// # Collection
//
// Blobs no record references are removed after a snapshot. The snapshot's
// state says which blobs its records name; the danger is a blob whose
// record is appended after the snapshot's barrier, so that the snapshot's
// state does not name it, while the blob was put before. The store closes
// that race with holds and generations:
//
//   - Put holds the blob it returns until the caller Releases it, after
//     appending the record (or when the record will never be appended);
//     Hold does the same for a blob that is stored already (a record that
//     copies another entity's ref). Every Put, Hold and Release stamps the
//     blob with the current generation.
//   - Cut, called just before the snapshot's barrier is appended, starts a
//     new generation.
//   - Collect(cut, keep), called once the snapshot is durable with keep
//     answering "does the snapshot's state name this blob", removes a blob
//     only if keep says no, nothing holds it, and its stamp is older than
//     the cut (or it has none: nothing touched it since this Store opened).
//
// Why no record loses its blob: the caller appends the record after Put or
// Hold returned, and Releases after the append. If the append came before
// the barrier, the snapshot's state includes the record and keep claims the
// blob. If it came after the barrier, the blob is either still held, or
// was Released after the append, hence after the Cut: its stamp is not
// older than the cut. (A blob put and released before the cut had its
// record appended before the barrier.) Collect checks the hold and the
// stamp and removes the file under one lock, which Put and Hold take
// before they look at the file, so a concurrent Put of the same bytes
// either protects the file or finds it gone and installs it again. A blob
// that survives a collection this way goes at the next one if no record
// names it by then.
//
// So Release only once the record is appended or certain never to be: after
// the actor's reply, not when a caller stops waiting for it (the append may
// still happen; the actor must then Release). Holds and stamps live in
// memory only: after a restart every blob that the restored state does not
// name is collectable at the first snapshot, which is right, because no
// caller of the new process holds it.
//
// # Logging and metrics
//
// Logs, with component=blob: each leftover temp file New removes (Info), a
// damaged copy Put replaces (Warn), each Collect that removed blobs (Info).
// Returned errors are not logged. Metrics, on the Registerer passed to New:
// gatehouse_blob_puts_total{result="stored"|"existing"|"too_large"|"corrupt"|"error"},
// gatehouse_blob_written_bytes_total, gatehouse_blob_put_duration_seconds,
// gatehouse_blob_collected_total, gatehouse_blob_corrupt_total, and
// gatehouse_blob_blobs and gatehouse_blob_stored_bytes as of the last
// Collect.
//
// # Concurrency and ownership
//
// A Store's methods are safe for concurrent use; Puts run in parallel, and
// Collect runs alongside them (it is meant to run on the snapshotting
// goroutine, one at a time). A Reader belongs to one goroutine. Only one
// Store may use a directory (nothing locks it: the WAL's lock on the same
// data dir keeps a second process out). No method takes a context: disk
// I/O is synchronous; Put's duration is bounded by its reader, so an HTTP
// caller bounds the body read, not the Store.
package blob
