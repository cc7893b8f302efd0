package actors

import (
	"maps"
	"slices"
)

// LiveMarks settle, in cluster mode, two writes of one entity by two nodes
// at about the same time, for an extension's actor (LiveApplier). The
// actor applies its own records when they commit and the other nodes'
// when the follower brings them, so without marks a node that wrote
// entity E at seq 12 and then gets another node's E at seq 10 would end
// with the older state, while the writer of 10 ends with 12. Once the
// actor gets records of other nodes it keeps, per entity K, the seq of its
// own last record until the log passes it: a foreign record of that
// entity with a lower seq is older, and skipped, so every node ends with
// the newest record of each entity, as replay does. Nothing of it is
// durable, and a node outside a cluster never keeps any. The zero value
// is ready; only the owning actor touches it.
type LiveMarks[K comparable] struct {
	on    bool
	seqs  map[K]uint64
	limit int // prune (forget what the log passed) above this many marks
}

// Bounds of the marks: pruned by the foreign records' position above
// minMarks, and above maxMarks (own writes without foreign records to
// prune by) halved, oldest first.
const (
	minMarks = 64
	maxMarks = 4096
)

// Own marks entity k as written by this node at seq (nothing until the
// first foreign record).
func (m *LiveMarks[K]) Own(seq uint64, k K) {
	if !m.on {
		return
	}
	m.seqs[k] = seq
	if len(m.seqs) > maxMarks {
		seqs := slices.Sorted(maps.Values(m.seqs))
		cut := seqs[len(seqs)/2]
		maps.DeleteFunc(m.seqs, func(_ K, s uint64) bool { return s < cut })
	}
}

// Passed tells the marks that the log has reached seq (a foreign record):
// it turns them on, and forgets marks below seq once there are many
// (foreign records come in log order: no later one is older).
func (m *LiveMarks[K]) Passed(seq uint64) {
	if !m.on {
		m.on, m.seqs, m.limit = true, map[K]uint64{}, minMarks
	}
	if len(m.seqs) > m.limit {
		maps.DeleteFunc(m.seqs, func(_ K, s uint64) bool { return s < seq })
		m.limit = max(minMarks, 2*len(m.seqs))
	}
}

// Older reports whether another node's record of k at seq is older than
// this node's last record of k; a mark the log has passed is forgotten.
func (m *LiveMarks[K]) Older(seq uint64, k K) bool {
	mark, ok := m.seqs[k]
	if ok && mark < seq {
		delete(m.seqs, k)
	}
	return ok && mark > seq
}
