package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"gatehouse/wal"
)

// The ledger of a budget: what it spent in its current period (settled,
// durable) and what is reserved (holds), plus the tokens of the last
// minute for max_tokens_per_minute. A hold is an allowance a node took
// (record 74, durable before any call spends from it: budgetallow.go); the
// node's calls spend from it in memory, and the node settles what they
// cost (record 75): at once for a hold of one call (records of older
// builds), every flush interval for an allowance, each settlement adding
// the calls' actual cost to the spent amount and setting what the hold
// keeps (Keep*: the calls still in flight and, while the node keeps
// spending from it, the unspent rest; 0: the hold ends). Records carry the
// hold's id, and the ledger's watermark (Seq) skips the records a snapshot
// already holds. A hold that a restart finds outstanding is settled at its
// full amount (its calls may have been paid for), once: the settlement is
// a record like any other.
//
// Periods are UTC days ("d:2006-01-02"), UTC months ("m:2006-01") or the
// whole life of the budget ("t"). A hold belongs to the period it was made
// in: the ledger moves to a new period (spent back to zero) with the first
// hold of that period, and a hold of the old period settles into the old
// one, never into the new.

// tpmWindow is the length of the tokens-per-minute window, in seconds.
const tpmWindow = 60

// ledgerRec is one budget's ledger (kind budget_ledger, data v1): a
// snapshot's copy of it; records 74 and 75 change it.
type ledgerRec struct {
	ID  uuid.UUID `json:"id"`  // the budget's
	Seq uint64    `json:"seq"` // the last record 74/75 reflected (a single node's)
	// Seqs are the watermarks of cluster mode, by the node that wrote the
	// records: a node applies its own records when they are written,
	// before older records of the others reach it, so one watermark
	// would skip those; each node's own records reach every node in the
	// order it wrote them.
	Seqs map[string]uint64 `json:"seqs,omitempty"`
	// LastHold is the seq of the last cluster hold the ledger took: a
	// hold decided on a ledger whose LastHold was another is void.
	LastHold    uint64    `json:"last_hold,omitempty"`
	Period      string    `json:"period"`
	SpentNano   int64     `json:"spent_nano"`
	SpentTokens int64     `json:"spent_tokens"`
	Holds       []holdRec `json:"holds"`  // by id
	Window      []winRec  `json:"window"` // the last minute's reservations, oldest first
}

// holdRec is one outstanding reservation.
type holdRec struct {
	ID     uuid.UUID `json:"id"`
	Period string    `json:"period"`
	Nano   int64     `json:"nano"`
	Tokens int64     `json:"tokens"`
	At     int64     `json:"at"` // Unix second
	// Node is the node that holds it in cluster mode ("" on one node).
	Node string `json:"node,omitempty"`
}

// winRec is the tokens a reservation counts in the minute window: its
// worst case until it settles, then its actual tokens.
type winRec struct {
	At     int64     `json:"at"`
	Tokens int64     `json:"tokens"`
	Hold   uuid.UUID `json:"hold"`
}

func (l *ledgerRec) ref() (kind, uuid.UUID) { return kindBudgetLedger, l.ID }

// clone is a deep copy (the shard keeps changing its ledger; a snapshot
// encodes the copy outside the actor).
func (l *ledgerRec) clone() *ledgerRec {
	c := *l
	c.Holds, c.Window, c.Seqs = slices.Clone(l.Holds), slices.Clone(l.Window), maps.Clone(l.Seqs)
	return &c
}

// budgetReserved is record 74: hold Hold of Nano and Tokens against budget
// Budget in Period, made at At.
type budgetReserved struct {
	V      uint8     `json:"v"`
	Budget uuid.UUID `json:"budget_id"`
	Hold   uuid.UUID `json:"reservation_id"`
	Period string    `json:"period"`
	Nano   int64     `json:"nano"`
	Tokens int64     `json:"tokens"`
	At     int64     `json:"at"`
	// Node is the node that takes the hold, in cluster mode; After the
	// ledger's LastHold when it was decided (the hold is void if the
	// ledger took another since).
	Node  string `json:"node,omitempty"`
	After uint64 `json:"after,omitempty"`
}

// budgetSettled is record 75: the calls of hold Hold of budget Budget
// settled since its last settlement cost Nano and Tokens; the hold keeps
// KeepNano and KeepTokens reserved (v2), or ends (both 0; v1 always ends
// it).
type budgetSettled struct {
	V          uint8     `json:"v"`
	Budget     uuid.UUID `json:"budget_id"`
	Hold       uuid.UUID `json:"reservation_id"`
	Nano       int64     `json:"nano"`
	Tokens     int64     `json:"tokens"`
	KeepNano   int64     `json:"keep_nano,omitempty"`
	KeepTokens int64     `json:"keep_tokens,omitempty"`
	// By is the node that wrote it, in cluster mode: the holder, or the
	// node that settled the hold of a node gone from the cluster.
	By string `json:"by,omitempty"`
	// Interrupted: settled at its full amount at start-up (the process
	// died during the call), or by another node (the holder left).
	Interrupted bool `json:"interrupted,omitempty"`
}

// Record versions: 74 is v1; 75 is v1 when it ends its hold, v2 when it
// keeps part of it (an older build must not read it as an end).
const (
	budgetRecVersion     = 1
	budgetKeepRecVersion = 2
)

func (e budgetReserved) record() wal.Record {
	e.V = budgetRecVersion
	return jsonRecord(recBudgetReserved, e)
}

func (e budgetSettled) record() wal.Record {
	e.V = budgetRecVersion
	if e.KeepNano != 0 || e.KeepTokens != 0 {
		e.V = budgetKeepRecVersion
	}
	return jsonRecord(recBudgetSettled, e)
}

// decodeBudgetEvent decodes records 74 and 75.
func decodeBudgetEvent(r wal.Record) (event, error) {
	var (
		ev              event
		v               uint8
		budget, holdRef uuid.UUID
		err             error
	)
	switch r.Type {
	case recBudgetReserved:
		var e budgetReserved
		err = json.Unmarshal(r.Data, &e)
		ev, v, budget, holdRef = e, e.V, e.Budget, e.Hold
	case recBudgetSettled:
		var e budgetSettled
		err = json.Unmarshal(r.Data, &e)
		ev, v, budget, holdRef = e, e.V, e.Budget, e.Hold
	}
	switch {
	case err != nil:
		return nil, err
	case v != budgetRecVersion && (r.Type != recBudgetSettled || v != budgetKeepRecVersion):
		return nil, fmt.Errorf("budget record v%d unsupported", v)
	case budget == uuid.Nil || holdRef == uuid.Nil:
		return nil, errors.New("budget record without budget or reservation id")
	}
	if e, ok := ev.(budgetSettled); ok && (e.KeepNano < 0 || e.KeepTokens < 0 || (v == budgetRecVersion && e.KeepNano+e.KeepTokens != 0)) {
		return nil, errors.New("budget settlement with a bad kept amount")
	}
	return ev, nil
}

// budgetTenant is the routing key of a budget's ledger.
func budgetTenant(id uuid.UUID) string { return "b:" + id.String() }

// ledgers are a tenant shard's budget ledgers, by budget id.
type ledgers map[uuid.UUID]*ledgerRec

// apply applies a budget record or a ledger's snapshot state; it reports
// false for any other event.
func (ls ledgers) apply(seq uint64, ev event) bool {
	switch e := ev.(type) {
	case budgetReserved:
		ls.of(e.Budget).reserve(seq, e)
	case budgetSettled:
		if l := ls[e.Budget]; l != nil { // a settlement after its ledger's deletion changes nothing
			l.settle(seq, e)
		}
	case entitySaved:
		l, ok := e.ent.(*ledgerRec)
		if !ok {
			return false
		}
		ls[l.ID] = l.clone()
	case entityDeleted:
		if e.kind != kindBudgetLedger {
			return false
		}
		delete(ls, e.id)
	default:
		return false
	}
	return true
}

func (ls ledgers) of(id uuid.UUID) *ledgerRec {
	l := ls[id]
	if l == nil {
		l = &ledgerRec{ID: id}
		ls[id] = l
	}
	return l
}

// appendTo appends a copy of every ledger to dst.
func (ls ledgers) appendTo(dst []entity) []entity {
	for _, l := range ls {
		dst = append(dst, l.clone())
	}
	return dst
}

// mark raises the watermark of node's records to seq, or reports that
// seq is reflected.
func (l *ledgerRec) mark(seq uint64, node string) bool {
	if node == "" {
		if reflects(l.Seq, seq) {
			return false
		}
		l.Seq = max(l.Seq, seq)
		return true
	}
	if reflects(l.Seqs[node], seq) {
		return false
	}
	if l.Seqs == nil {
		l.Seqs = map[string]uint64{}
	}
	l.Seqs[node] = max(l.Seqs[node], seq)
	return true
}

func (l *ledgerRec) reserve(seq uint64, e budgetReserved) {
	if !l.mark(seq, e.Node) || l.hold(e.Hold) >= 0 {
		return
	}
	if e.Node != "" {
		if e.After != l.LastHold {
			return // decided on a ledger that missed a hold before it: void
		}
		l.LastHold = seq
	}
	if laterPeriod(e.Period, l.Period) {
		l.Period, l.SpentNano, l.SpentTokens = e.Period, 0, 0
	}
	h := holdRec{ID: e.Hold, Period: e.Period, Nano: e.Nano, Tokens: e.Tokens, At: e.At, Node: e.Node}
	i, _ := slices.BinarySearchFunc(l.Holds, e.Hold, func(x holdRec, id uuid.UUID) int { return cmpUUID(x.ID, id) })
	l.Holds = slices.Insert(l.Holds, i, h)
	l.prune(e.At)
	if e.Tokens > 0 {
		l.Window = append(l.Window, winRec{At: e.At, Tokens: e.Tokens, Hold: e.Hold})
	}
}

func (l *ledgerRec) settle(seq uint64, e budgetSettled) {
	i := l.hold(e.Hold)
	if !l.mark(seq, e.By) || i < 0 {
		return
	}
	h := l.Holds[i]
	if e.KeepNano == 0 && e.KeepTokens == 0 {
		l.Holds = slices.Delete(l.Holds, i, i+1)
	} else {
		l.Holds[i].Nano, l.Holds[i].Tokens = e.KeepNano, e.KeepTokens
	}
	if h.Period == l.Period {
		l.SpentNano += e.Nano
		l.SpentTokens += e.Tokens
	}
	// The window counts the hold's tokens at its second: what it keeps
	// plus what its calls used.
	for j := range l.Window {
		if l.Window[j].Hold == e.Hold {
			l.Window[j].Tokens += e.Tokens + e.KeepTokens - h.Tokens
		}
	}
}

// laterPeriod reports whether a hold of period p moves a ledger in period
// cur to a new period: a later day or month, or another kind (the budget's
// period changed). In cluster mode a node applies its own holds before
// the other nodes' older ones reach it: an older period changes nothing.
func laterPeriod(p, cur string) bool {
	if p == cur {
		return false
	}
	return cur == "" || p[0] != cur[0] || p > cur
}

// hold is the index of hold id, or -1.
func (l *ledgerRec) hold(id uuid.UUID) int {
	i, ok := slices.BinarySearchFunc(l.Holds, id, func(x holdRec, id uuid.UUID) int { return cmpUUID(x.ID, id) })
	if !ok {
		return -1
	}
	return i
}

// prune drops the window's entries a minute before now (a reservation's
// time: the same live and on replay).
func (l *ledgerRec) prune(now int64) {
	n := 0
	for n < len(l.Window) && l.Window[n].At <= now-tpmWindow {
		n++
	}
	if n > 0 {
		l.Window = slices.Delete(l.Window, 0, n)
	}
}

// spend is a ledger's numbers in the period of now: settled, and held by
// the calls of that period in flight (and, for the minute window, the
// tokens of the last minute).
type spend struct {
	spentNano, spentTokens       int64
	reservedNano, reservedTokens int64
	minuteTokens                 int64
}

// spendAt is l's spend in period (the period key of now) at Unix second
// now. A nil ledger spent nothing.
func (l *ledgerRec) spendAt(period string, now int64) spend {
	var s spend
	if l == nil {
		return s
	}
	if l.Period == period {
		s.spentNano, s.spentTokens = l.SpentNano, l.SpentTokens
	}
	for _, h := range l.Holds {
		if h.Period == period {
			s.reservedNano += h.Nano
			s.reservedTokens += h.Tokens
		}
	}
	for _, w := range l.Window {
		if w.At > now-tpmWindow {
			s.minuteTokens += w.Tokens
		}
	}
	return s
}

// budgetLimits are a budget's caps; nano < 0: no USD cap; tokens, tpm 0:
// none.
type budgetLimits struct {
	period      string
	nano        int64
	tokens, tpm int64
}

// periodKey is the key of the period of kind p that holds t (UTC).
func periodKey(p string, t time.Time) string {
	t = t.UTC()
	switch p {
	case PeriodDay:
		return "d:" + t.Format(time.DateOnly)
	case PeriodMonth:
		return "m:" + t.Format("2006-01")
	}
	return "t"
}

// resetOf is when the period of kind p holding now ends (false: never).
func resetOf(p string, now time.Time) (time.Time, bool) {
	now = now.UTC()
	y, m, d := now.Date()
	switch p {
	case PeriodDay:
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), true
	case PeriodMonth:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC), true
	}
	return time.Time{}, false
}

// periodFor is the period a hold made at now goes to: now's, or the
// ledger's when the clock went back (a period never goes backwards).
func (l *ledgerRec) periodFor(p string, now time.Time) string {
	k := periodKey(p, now)
	if l != nil && len(l.Period) == len(k) && l.Period[0] == k[0] && l.Period > k {
		return l.Period
	}
	return k
}

// refusal says which cap a reservation would break: "" when it fits.
func (s spend) refusal(lim budgetLimits, nano, tokens int64) string {
	switch {
	case lim.nano >= 0 && s.spentNano+s.reservedNano+nano > lim.nano:
		return "max_usd"
	case lim.tokens > 0 && s.spentTokens+s.reservedTokens+tokens > lim.tokens:
		return "max_tokens"
	case lim.tpm > 0 && s.minuteTokens+tokens > lim.tpm:
		return "max_tokens_per_minute"
	}
	return ""
}

// remaining is what is left of the caps (-1: no such cap).
func (s spend) remaining(lim budgetLimits) (nano, tokens int64) {
	nano, tokens = -1, -1
	if lim.nano >= 0 {
		nano = max(0, lim.nano-s.spentNano-s.reservedNano)
	}
	if lim.tokens > 0 {
		tokens = max(0, lim.tokens-s.spentTokens-s.reservedTokens)
	}
	return nano, tokens
}
