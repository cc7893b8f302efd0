package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"gatehouse/actors/cluster/internal/wire"
	"gatehouse/actors/ratelimit"
)

// minute is the resolution of a Quota's summary of a window, in seconds.
const minute = 60

// maxChunkDivisor sets the reservation chunk: max(1, limit/100).
const maxChunkDivisor = 100

// Quota is what etcd holds for one key: enough for a successor to rebuild a
// window that counts at least every request the previous owners admitted.
type Quota struct {
	// Minutes are the window's admissions summed per minute, each counted
	// at the last second of its minute (never earlier than the admissions
	// it sums), oldest first.
	Minutes []MinuteCount
	// Outstanding counts tokens reserved and not yet spent when the record
	// was written: a successor counts them as admitted at its takeover.
	Outstanding uint32
	// At is the Unix second the record was written at.
	At int64
}

// MinuteCount is N admissions counted at Unix second End.
type MinuteCount struct {
	End int64
	N   uint32
}

// Summarize returns the Quota for window w at second at, with outstanding
// tokens reserved and not spent.
func Summarize(w *ratelimit.Window, outstanding uint32, at int64) Quota {
	q := Quota{Outstanding: outstanding, At: at}
	w.Each(func(sec int64, n uint32) {
		end := sec - mod(sec, minute) + minute - 1
		if k := len(q.Minutes); k > 0 && q.Minutes[k-1].End == end {
			q.Minutes[k-1].N = satAdd(q.Minutes[k-1].N, n)
			return
		}
		q.Minutes = append(q.Minutes, MinuteCount{End: end, N: n})
	})
	return q
}

// Restore adds q's admissions to w as a successor taking over at second now
// must count them: each minute at its end (or at now, if its end is later),
// and the outstanding tokens at now. Minutes that have left the window by
// now are dropped by w itself.
func (q Quota) Restore(w *ratelimit.Window, now int64) {
	for _, m := range q.Minutes {
		w.Add(min(m.End, now), m.N)
	}
	w.Add(max(now, q.At), q.Outstanding)
}

// recordVersion is the first byte of an encoded Quota.
const recordVersion = 1

// Encode returns q's compact binary form: a version byte, then varints.
func (q Quota) Encode() []byte {
	b := make([]byte, 0, 16+len(q.Minutes)*6)
	b = append(b, recordVersion)
	b = binary.AppendVarint(b, q.At)
	b = binary.AppendUvarint(b, uint64(q.Outstanding))
	b = binary.AppendUvarint(b, uint64(len(q.Minutes)))
	prev := q.At
	for _, m := range q.Minutes {
		b = binary.AppendVarint(b, prev-m.End) // minutes are near At: small deltas
		b = binary.AppendUvarint(b, uint64(m.N))
		prev = m.End
	}
	return b
}

// ErrBadRecord reports a Quota record that does not decode.
var ErrBadRecord = errors.New("cluster: malformed quota record")

// DecodeQuota parses a record written by Encode.
func DecodeQuota(b []byte) (Quota, error) {
	var q Quota
	if len(b) == 0 || b[0] != recordVersion {
		return q, fmt.Errorf("%w: version", ErrBadRecord)
	}
	r := wire.Reader{B: b[1:]}
	q.At = r.Varint()
	q.Outstanding = r.U32()
	n := r.Uvarint()
	if n > ratelimit.WindowSeconds/minute+2 {
		return Quota{}, fmt.Errorf("%w: %d minutes", ErrBadRecord, n)
	}
	prev := q.At
	for range n {
		end := prev - r.Varint()
		q.Minutes = append(q.Minutes, MinuteCount{End: end, N: r.U32()})
		prev = end
	}
	if r.Err || len(r.B) != 0 {
		return Quota{}, fmt.Errorf("%w: truncated or trailing bytes", ErrBadRecord)
	}
	return q, nil
}

// Allowance is one key's admission state on its owner: the exact window
// and the tokens reserved in etcd and not yet spent. It is owned by the
// key's actor and not safe for concurrent use.
type Allowance struct {
	Win ratelimit.Window
	// Balance is the tokens committed to etcd and not yet spent.
	Balance uint32
	// pending is the chunk of a reservation in flight (Reserve returned it,
	// Reserved or Failed has not been called).
	pending uint32
}

// TakeOver returns the Allowance of a new owner at second now, from the
// last record committed for the key (none: a key with no record).
func TakeOver(q *Quota, now int64) Allowance {
	var a Allowance
	if q != nil {
		q.Restore(&a.Win, now)
	}
	return a
}

// Chunk is the reservation chunk for limit: max(1, limit/100).
func Chunk(limit int64) uint32 {
	return uint32(min(max(1, limit/maxChunkDivisor), ratelimit.MaxLimit))
}

// Admit decides one request at second t under limit. It admits only what
// the window allows and the balance covers; a request the window allows
// but the balance does not is not admitted (d.Allowed false) and starved
// is true: the caller waits for a reservation, or fails closed.
func (a *Allowance) Admit(t, limit int64) (d ratelimit.Decision, starved bool) {
	if a.Balance > 0 { // the common case: one pass over the window
		if d = a.Win.Allow(t, limit); d.Allowed {
			a.Balance--
		}
		return d, false
	}
	d = a.Win.Peek(t, limit)
	if !d.Allowed {
		return d, false
	}
	d.Allowed = false
	return d, true
}

// Reserve returns the tokens to reserve now under limit at second t, and
// the Quota record to commit for them (fenced) before they may be spent;
// n is 0 when the balance is above half a chunk or a reservation is in
// flight. A reservation tops the balance up to one chunk, so the tokens
// outstanding never exceed a chunk. The record counts the balance and the
// new tokens as outstanding, so a successor that reads it counts every
// token this owner may still spend.
func (a *Allowance) Reserve(t, limit int64) (n uint32, rec Quota) {
	if a.pending > 0 {
		return 0, Quota{}
	}
	chunk := Chunk(limit)
	if a.Balance > chunk/2 {
		return 0, Quota{}
	}
	used := a.Win.Used(t)
	room := clampLimit(limit) - used - int64(a.Balance)
	if room <= 0 {
		return 0, Quota{}
	}
	n = uint32(min(int64(chunk-a.Balance), room))
	a.pending = n
	return n, Summarize(&a.Win, a.Balance+n, t)
}

// Reserved credits a committed reservation of n tokens.
func (a *Allowance) Reserved(n uint32) {
	a.pending -= min(n, a.pending)
	a.Balance = satAdd(a.Balance, n)
}

// Failed forgets a reservation of n tokens that did not commit. The tokens
// are not credited; a successor may still count them (the commit's outcome
// can be unknown), which only under-admits.
func (a *Allowance) Failed(n uint32) { a.pending -= min(n, a.pending) }

// Settle returns the record that hands the key over at second t with
// nothing outstanding: written by an owner that stops admitting (a
// graceful release), it spares the successor the unspent balance.
func (a *Allowance) Settle(t int64) Quota {
	a.Balance = 0
	return Summarize(&a.Win, a.pending, t)
}

func clampLimit(l int64) int64 { return min(max(l, 0), ratelimit.MaxLimit) }

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

func satAdd(a, b uint32) uint32 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<32 - 1
}
