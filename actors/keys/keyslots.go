package keys

import (
	"sync"

	"github.com/google/uuid"
)

// keySlots counts the keys of each owner that created one since start,
// for the key limit (KeyOwner.MaxKeys): counted from the shards on the
// owner's first reservation (nothing at start-up), then kept by reserve
// (before a create) and add (-1 for a failed create or a delete; ±1 for
// a key another node of a cluster created or deleted).
type keySlots struct {
	mu sync.Mutex
	n  map[uuid.UUID]int
}

type reserveReply uint8

const (
	reserveRefused reserveReply = iota
	reserveTaken
	reserveCount // count the owner's keys and ask again
)

// reserve takes one of owner's key slots if fewer than max are used.
// counted is the owner's key count as the caller found it, or -1; the
// reply is reserveCount when the count is needed, else whether a slot
// was taken.
func (k *keySlots) reserve(owner uuid.UUID, max, counted int) reserveReply {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, known := k.n[owner]
	switch {
	case !known && counted < 0:
		return reserveCount
	case !known:
		n = counted
	}
	if n >= max {
		k.n[owner] = n
		return reserveRefused
	}
	k.n[owner] = n + 1
	return reserveTaken
}

// add moves owner's count by delta, if it is kept.
func (k *keySlots) add(owner uuid.UUID, delta int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n, ok := k.n[owner]; ok {
		k.n[owner] = max(n+delta, 0)
	}
}
