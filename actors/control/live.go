package control

import (
	"maps"
	"slices"
)

// liveMarks settle, in cluster mode, two writes of one entity by two nodes
// at about the same time. The actor applies its own records when it
// commits and the other nodes' when the follower brings them, so without
// marks a node that revoked a token at seq 12 and then gets another
// node's save of that token (its last use) at seq 10 would bring the token
// back, while every other node ends without it. Once the actor gets
// records of other nodes it keeps, per entity, the seq of its own last
// record until the log passes it: a foreign record of that entity with a
// lower seq is older, and skipped, so every node ends with the newest
// record of each entity, as replay does. Nothing of it is durable.
type liveMarks struct {
	on    bool
	seqs  map[string]uint64 // kind NUL id → seq
	limit int               // prune (forget what the log passed) above this many
}

// Bounds of the marks: pruned by the foreign records' position above
// minMarks, halved (oldest first) above maxMarks.
const (
	minMarks = 64
	maxMarks = 4096
)

func markKey(e event) string { return string(e.kind) + "\x00" + e.id }

// own marks e, this node's record at seq.
func (m *liveMarks) own(seq uint64, e event) {
	if !m.on {
		return
	}
	m.seqs[markKey(e)] = seq
	if len(m.seqs) > maxMarks {
		seqs := slices.Sorted(maps.Values(m.seqs))
		cut := seqs[len(seqs)/2]
		maps.DeleteFunc(m.seqs, func(_ string, s uint64) bool { return s < cut })
	}
}

// stale reports whether e, another node's record at seq, is older than
// this node's last record of the same entity. Foreign records come in log
// order, so marks below seq are forgotten: no later one is older.
func (m *liveMarks) stale(seq uint64, e event) bool {
	if !m.on {
		m.on, m.seqs, m.limit = true, map[string]uint64{}, minMarks
	}
	if len(m.seqs) > m.limit {
		maps.DeleteFunc(m.seqs, func(_ string, s uint64) bool { return s < seq })
		m.limit = max(minMarks, 2*len(m.seqs))
	}
	k := markKey(e)
	mark, ok := m.seqs[k]
	if ok && mark < seq {
		delete(m.seqs, k)
	}
	return ok && mark > seq
}
