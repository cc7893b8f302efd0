// Package blob is the gateway's store for bytes that do not belong in the
// WAL: skill ZIPs, media and agent workspace files. Blobs are immutable and
// content-addressed (SHA-256); the WAL records that use them carry only the
// Ref.
//
// # Layout
//
//	<dir>/sha256/ab/cdef…   the blob whose SHA-256 is abcdef… (64 hex chars:
//	                        the first two name the fan-out directory)
//	<dir>/tmp/put-*         a Put in progress; removed by Open (a crash
//	                        leaves them behind)
//
// Files are mode 0600, directories 0700.
//
// # Durability
//
// Put streams into a temp file while hashing, then: fsync the file, close
// it, rename it to its address, fsync the fan-out directory (and the sha256
// directory when the fan-out directory was new). Only then does it return
// the Ref, so the caller appends the WAL record that names the blob after
// the blob is durable: a crash can leave a blob no record names (collected
// later), never a record naming a missing blob. Putting bytes that exist
// already replaces nothing and costs one hash of the input.
//
// # Reading
//
// Open returns a reader that hashes what it reads: a blob whose bytes no
// longer match its name (bit rot, truncation) reads as ErrCorrupt at the
// end instead of io.EOF, and Verify checks a whole blob at once. A missing
// blob is ErrNotFound. Neither ever panics.
//
// # Collection
//
// Blobs no record references are removed after a snapshot:
//
//	cut := store.Cut()       // before the snapshot's barrier is appended
//	... append the barrier, capture the state, save the snapshot ...
//	store.Collect(cut, keep) // keep: the refs the captured state names
//
// The race this rule closes: a blob put before the cut whose record is
// appended after the barrier is not in the snapshot's keep set. So a Put
// holds its blob until the caller calls Release (after appending the
// record, or after giving up), and Release stamps the blob with the current
// generation; Collect removes only blobs that are not kept, not held, and
// whose last Put or Release came before the cut. A record appended after
// the barrier was released after the cut, so its blob survives; one
// appended before the barrier is in keep. Holds and stamps are in memory
// only: after a restart every blob not named by a record is collectable at
// the first snapshot, which is right (no caller of this process holds it).
//
// # Usage
//
//	st, err := blob.Open(blob.Config{Dir: filepath.Join(dataDir, "blobs")}, lg)
//	ref, size, err := st.Put(r, 20<<20) // ErrTooLarge beyond 20 MiB
//	defer st.Release(ref)
//	_, err = wal.Append(recordNaming(ref, size))
//	rc, err := st.Open(ref) // read; ErrCorrupt at the end if damaged
//
// All methods are safe for concurrent use.
package blob
