package keys

import (
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/ratelimit"
)

// usageDays is how many UTC days of per-day usage a key keeps (today + 31 before).
const usageDays = 32

// keyRecord is the control-plane part of a key. Times are Unix seconds, 0 = null.
// A million of them stay resident, so what most keys never have (a
// rotation) sits behind a pointer.
//
// The fields an authorization reads come first (id, hash, rot,
// expiresAt, rateLimit, owner, revoked), so they share the slot's first
// cache lines with its live pointer (slot, shard.go); the rest follow.
// revoked sits before the byte arrays so that it costs no padding.
type keyRecord struct {
	id        uuid.UUID
	hash      hash      // current secret
	rot       *rotation // nil until the first rotation; never changed in place
	expiresAt int64
	rateLimit int64
	owner     uuid.UUID
	revoked   bool
	preview   previewChars
	sealed    sealedKey // AES-256-GCM of the current secret, bound to the id
	name      string
	createdAt int64
}

// rotation is what a key keeps of its last rotation. Records share it
// (durable copies copy the pointer), so it is replaced, never mutated.
type rotation struct {
	prevHash  hash // rotated-out secret, valid until graceEnds
	hasPrev   bool
	rotatedAt int64
	graceEnds int64
}

// prev returns the rotated-out secret, if any.
func (r *keyRecord) prev() (hash, bool) {
	if r.rot == nil || !r.rot.hasPrev {
		return hash{}, false
	}
	return r.rot.prevHash, true
}

func (r *keyRecord) rotatedAt() int64 {
	if r.rot == nil {
		return 0
	}
	return r.rot.rotatedAt
}

func (r *keyRecord) graceEnds() int64 {
	if r.rot == nil {
		return 0
	}
	return r.rot.graceEnds
}

// dayCount is the usage of one UTC day (day = Unix seconds / 86400),
// packed in 8 bytes: the day in the top 24 bits (signed: ±22,900 years
// around 1970) and the count in the low 40. A day's count cannot reach
// 2^40: the limiter admits at most maxRateLimit (1e9) an hour, 2.4e10 a day.
type dayCount uint64

const (
	dayCountBits = 40
	dayCountMask = 1<<dayCountBits - 1
	minDay       = -1 << 23
	maxDay       = 1<<23 - 1
)

func mkDayCount(day int32, n int64) dayCount {
	return dayCount(uint64(uint32(day))<<dayCountBits | uint64(n)&dayCountMask)
}

// day returns the UTC day, sign-extended from its 24 bits.
func (c dayCount) day() int32 { return int32(uint32(c>>dayCountBits)<<8) >> 8 }

// n returns the day's count.
func (c dayCount) n() int64 { return int64(c & dayCountMask) }

// usage is a key's request counters.
type usage struct {
	total    int64
	lastUsed int64
	days     []dayCount // ascending, at most usageDays entries, allocated on first use
}

// add counts n requests at Unix second sec.
func (u *usage) add(sec int64, n int64) {
	u.total += n
	u.lastUsed = max(u.lastUsed, sec)
	d := int32(sec / 86400)
	i := len(u.days)
	for i > 0 && u.days[i-1].day() > d {
		i--
	}
	if i > 0 && u.days[i-1].day() == d {
		u.days[i-1] = mkDayCount(d, u.days[i-1].n()+n)
		return
	}
	if len(u.days) > 0 && d <= u.days[len(u.days)-1].day()-usageDays {
		return // older than what we keep
	}
	u.days = append(u.days, 0)
	copy(u.days[i+1:], u.days[i:])
	u.days[i] = mkDayCount(d, n)
	if newest := u.days[len(u.days)-1].day(); u.days[0].day() <= newest-usageDays {
		cut := 0
		for cut < len(u.days) && u.days[cut].day() <= newest-usageDays {
			cut++
		}
		u.days = append(u.days[:0], u.days[cut:]...)
	}
}

// sub removes n requests previously added at sec (used to derive the durable image).
func (u *usage) sub(sec int64, n int64) {
	u.total -= n
	d := int32(sec / 86400)
	for i := range u.days {
		if u.days[i].day() == d {
			u.days[i] = mkDayCount(d, u.days[i].n()-n)
			return
		}
	}
}

// count returns the usage of UTC day d.
func (u *usage) count(d int32) int64 {
	for _, dc := range u.days {
		if dc.day() == d {
			return dc.n()
		}
	}
	return 0
}

// clone deep-copies u.
func (u usage) clone() usage {
	u.days = append([]dayCount(nil), u.days...)
	return u
}

// keyState is everything one key actor owns. It is mutated only by its owner:
// the shard while the key is passive, the key actor while it is live, the
// restorer before any actor runs.
//
// The window and usage an admission updates come first, with usageSeq,
// which each flush round's commit moves; then rec, whose hot fields lead
// (see keyRecord): with the slot's live pointer before them, an
// authorization and a flush read the slot's first 160 bytes.
type keyState struct {
	win *ratelimit.Window // nil until the first admitted request
	use usage
	// applied and usageSeq are the sequences of the last control record and
	// the last usage record reflected here. Each kind reaches a key in log
	// order, but a usage record may commit before a control record that is
	// applied first, so replay needs one watermark per kind (see skip).
	usageSeq uint64
	rec      keyRecord
	applied  uint64
}

// window returns the key's limiter window, allocating it on first use.
func (s *keyState) window() *ratelimit.Window {
	if s.win == nil {
		s.win = new(ratelimit.Window)
	}
	return s.win
}

// skip reports whether replaying ev at seq would apply it a second time.
// Deletion is never skipped: it is idempotent, and a key captured just
// before its deletion reached the log must still go.
func (s *keyState) skip(seq uint64, ev keyEvent) bool {
	switch ev.(type) {
	case keyUsed:
		return seq <= s.usageSeq
	case keyDeleted:
		return false
	}
	return seq <= s.applied
}

// secCount is n admitted requests at Unix second sec.
type secCount struct {
	sec int64
	n   uint32
}

// check decides whether a presented secret (by hash) is usable at now.
func (s *keyState) check(h hash, now int64) error {
	r := &s.rec
	switch {
	case r.revoked:
		return ErrKeyRevoked
	case h == r.hash:
	case r.rot != nil && r.rot.hasPrev && h == r.rot.prevHash:
		if now >= r.rot.graceEnds {
			return ErrKeyExpired
		}
	default:
		return ErrKeyInvalid
	}
	if r.expiresAt != 0 && now >= r.expiresAt {
		return ErrKeyExpired
	}
	return nil
}

// checkStatus is check without the secret: revoked or expired.
func (s *keyState) checkStatus(now int64) error {
	switch {
	case s.rec.revoked:
		return ErrKeyRevoked
	case s.rec.expiresAt != 0 && now >= s.rec.expiresAt:
		return ErrKeyExpired
	}
	return nil
}

// active reports whether the key may be used at now (isActive in the API).
func (s *keyState) active() bool { return !s.rec.revoked }

// info renders the read-only view.
func (s *keyState) info() KeyInfo {
	r := &s.rec
	return KeyInfo{
		ID:          r.id,
		Owner:       r.owner,
		Name:        r.name,
		Prefix:      KeyPrefix,
		Preview:     r.preview.String(),
		RateLimit:   r.rateLimit,
		IsActive:    s.active(),
		RotatedAt:   unixOrZero(r.rotatedAt()),
		GraceEndsAt: unixOrZero(r.graceEnds()),
		LastUsedAt:  unixOrZero(s.use.lastUsed),
		UsageCount:  s.use.total,
		ExpiresAt:   unixOrZero(r.expiresAt),
		CreatedAt:   unixOrZero(r.createdAt),
	}
}

// usageView answers KeyUsage for the last days UTC days ending at now.
func (s *keyState) usageView(now time.Time, days int) Usage {
	today := int32(now.Unix() / 86400)
	out := Usage{Daily: make([]DayCount, days), Total: s.use.total, LastUsedAt: unixOrZero(s.use.lastUsed)}
	for i := range days {
		d := today - int32(days-1-i)
		out.Daily[i] = DayCount{Date: time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly), Count: s.use.count(d)}
	}
	dec := s.window().Peek(now.Unix(), s.rec.rateLimit)
	out.Limit, out.Used, out.Remaining = dec.Limit, dec.Used, dec.Remaining
	if dec.Used > 0 {
		out.ResetAt = time.Unix(dec.Reset, 0)
	}
	return out
}

// durableCopy returns a deep copy of s with the not-yet-logged deltas taken
// out: exactly what replaying the WAL up to s.applied produces.
func (s *keyState) durableCopy(unlogged ...[]secCount) *keyState {
	c := &keyState{rec: s.rec, use: s.use.clone(), applied: s.applied, usageSeq: s.usageSeq}
	if s.win != nil {
		w := s.win.Clone()
		c.win = &w
	}
	for _, list := range unlogged {
		for _, sc := range list {
			c.window().Sub(sc.sec, sc.n)
			c.use.sub(sc.sec, int64(sc.n))
		}
	}
	return c
}

func unixOrZero(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}
