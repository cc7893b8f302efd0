package control

import "gatehouse/actors"

// liveMarks are the control actor's actors.LiveMarks, by kind and id: a
// node that revoked a token at seq 12 and then gets another node's save of
// that token (its last use) at seq 10 must not bring the token back.
type liveMarks struct{ actors.LiveMarks[string] }

func markKey(e event) string { return string(e.kind) + "\x00" + e.id }

// own marks e, this node's record at seq.
func (m *liveMarks) own(seq uint64, e event) { m.Own(seq, markKey(e)) }

// stale reports whether e, another node's record at seq, is older than
// this node's last record of the same entity; a token's revocation never
// is.
func (m *liveMarks) stale(seq uint64, e event) bool {
	m.Passed(seq)
	if e.kind == kindToken && e.data == nil {
		// A token's revocation is final (ids are never reused): it
		// applies whatever this node saved of the token since (a last
		// use, which the log orders after it and apply ignores).
		return false
	}
	return m.Older(seq, markKey(e))
}
