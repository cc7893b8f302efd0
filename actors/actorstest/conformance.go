package actorstest

// Conformance checks the rules of actors.Extension (see its doc comment)
// for one domain, the same way for every domain. A domain runs it from a
// test with a Domain value and nothing else:
//
//	func TestConformance(t *testing.T) {
//		actorstest.Conformance(t, actorstest.Domain{
//			Start: func(tb testing.TB, opts ...actorstest.Option) (*actorstest.Node, actorstest.Driver) {
//				n := actorstest.New(tb, append(opts, actorstest.WithExtensions(func() []actors.Extension {
//					return []actors.Extension{keys.New(keys.DefaultConfig())}
//				}))...)
//				n.Start()
//				return n, &keysDriver{n: n, r: rand.New(rand.NewPCG(1, 2))}
//			},
//			Steps:  40,
//			Kind:   keysRecordKind, // "80 key_saved", ...
//			Covers: []string{"80 key_saved", "81 key_deleted", "82 usage"},
//		})
//	}
//
// Start builds a started node of the domain (pass opts on to New: the
// suite gives a follower the writer's clock); the checks run in
// parallel, so it must be safe to call concurrently. It returns the node
// and a Driver that runs
// command i on it. The driver must read the running extension from the
// node at every step (n.Exts, or a Domain.Ext of its own): the suite
// crashes and restarts the node between steps. A step may do nothing (a
// random command that found nothing to act on); over Steps steps the
// commands must write every record type the domain owns, which Covers
// checks when Kind and Covers are set.
//
// The checks, each a subtest:
//   - restore: after every step the node is crashed (and every third
//     time stopped cleanly) and started again, with a snapshot every
//     SnapshotEvery steps; the restored state equals the live one.
//   - offline-image: after every step, the extension's OfflineImage
//     restored from the last snapshot's section and fed the WAL after it
//     has the section Capture returns (skipped without OfflineImager).
//   - replay-rule: a section captured after step j, restored and fed
//     every record after step k's last one, for every k <= j, equals the
//     final live state; and the same over Records' script, if any.
//   - live-apply: a follower node applies the writer's records through
//     ApplyLive after every step, once or twice each (once only with
//     LiveOnce), and equals the writer after every step (skipped without
//     LiveApplier).
//
// States are compared as sections (Capture, OfflineImage.Section),
// through Canon when a domain's section may order equal states
// differently. A domain keeps in its own tests what only it can check
// (its views, a model of the expected state) and can add per-step checks
// through AfterRestore and AfterApply.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"gatehouse/actors"
	"gatehouse/wal"
)

// Driver runs a domain's commands on the node it was made for.
type Driver interface {
	// Step runs command i (0, 1, ...) against the node's running system.
	Step(tb testing.TB, i int)
}

// Settler is an optional Driver capability: Settle makes durable and
// applied what the domain's actors still hold in flight (batched
// records), so that Capture reflects exactly the records in the WAL.
type Settler interface {
	Settle(tb testing.TB)
}

// Domain is what Conformance needs of a domain.
type Domain struct {
	// Start returns a new started node of the domain, built with opts, and
	// a driver for it.
	Start func(tb testing.TB, opts ...Option) (*Node, Driver)
	// Ext returns the extension under test of a running node (nil:
	// n.Exts[0]).
	Ext func(n *Node) actors.Extension
	// Steps is the number of commands each check runs (0: 30).
	Steps int
	// CutSteps is the number of commands replay-rule drives (0: Steps):
	// it builds an image per pair of cuts, so a domain whose commands
	// need many steps to write every record kind may drive fewer there
	// and script every kind in Records. Covers is not checked there
	// when CutSteps < Steps.
	CutSteps int
	// SnapshotEvery is how often (in steps) restore takes a snapshot
	// (0: 2).
	SnapshotEvery int
	// Canon returns the form of a section that is compared (nil: as is).
	Canon func(tb testing.TB, section []byte) []byte
	// Records is a scripted sequence of the domain's records, seq 1..n,
	// for the replay rule over an exact script beside the driven one
	// (nil: none). It is called once per use; records must be fresh.
	Records func(tb testing.TB) []wal.Record
	// ScriptImage returns the image Records are replayed on (nil: the
	// driven extension's OfflineImage).
	ScriptImage func() actors.OfflineImage
	// Kind names a record for Covers ("" for records not counted).
	Kind func(r wal.Record) string
	// Covers are the kinds every check's commands must have written.
	Covers []string
	// AfterRestore, if set, checks more after each restart: what a node
	// showed before it (before, read by Observe) against after it.
	Observe      func(tb testing.TB, n *Node) any
	AfterRestore func(tb testing.TB, what string, before any, n *Node)
	// LiveOnce skips live-apply's "twice" run: the domain's ApplyLive
	// adds a record's effect each time it is called (the keys' usage:
	// cluster mode's follower delivers each record once, in log order,
	// and a node's own later records may already have raised a key's
	// watermark past another node's earlier one, so ApplyLive cannot skip
	// by watermark).
	LiveOnce bool
	// AfterApply, if set, checks more after each step of live-apply,
	// once the follower applied the step's records.
	AfterApply func(tb testing.TB, what string, writer, follower *Node)
}

// Conformance runs every check of the package comment on d.
func Conformance(t *testing.T, d Domain) {
	t.Helper()
	if d.Start == nil {
		t.Fatal("actorstest.Conformance: Domain.Start is nil")
	}
	// The checks run on nodes of their own, in parallel.
	t.Run("restore", func(t *testing.T) { t.Parallel(); checkRestore(t, d) })
	t.Run("offline-image", func(t *testing.T) { t.Parallel(); checkOffline(t, d) })
	t.Run("replay-rule", func(t *testing.T) { t.Parallel(); checkReplayRule(t, d) })
	t.Run("live-apply", func(t *testing.T) { t.Parallel(); checkLiveApply(t, d) })
}

func (d Domain) steps() int {
	if d.Steps > 0 {
		return d.Steps
	}
	return 30
}

func (d Domain) ext(n *Node) actors.Extension {
	if d.Ext != nil {
		return d.Ext(n)
	}
	return n.Exts[0]
}

func (d Domain) canon(tb testing.TB, section []byte) []byte {
	if d.Canon != nil {
		return d.Canon(tb, section)
	}
	return section
}

// capture settles drv and returns the node's WAL index and its section.
func (d Domain) capture(tb testing.TB, n *Node, drv Driver) (uint64, []byte) {
	tb.Helper()
	if s, ok := drv.(Settler); ok {
		s.Settle(tb)
	}
	idx, err := n.Log.LastIndex()
	if err != nil {
		tb.Fatalf("LastIndex: %v", err)
	}
	b, err := d.ext(n).Capture(Ctx(tb))
	if err != nil {
		tb.Fatalf("Capture: %v", err)
	}
	return idx, b
}

// coverage counts the kinds of records a check wrote.
type coverage struct {
	d    Domain
	seen map[string]int
	last uint64 // the last WAL index scanned
}

// scan counts the records of n's WAL it has not seen yet; it must run
// before a snapshot truncates them.
func (c *coverage) scan(tb testing.TB, n *Node, ext actors.Extension) {
	tb.Helper()
	if c.d.Kind == nil {
		return
	}
	recs := walRecords(tb, n, ext, c.last, c)
	if idx, err := n.Log.LastIndex(); err == nil {
		c.last = idx
	} else if len(recs) > 0 {
		c.last = recs[len(recs)-1].seq
	}
}

func (c *coverage) see(r wal.Record) {
	if c.d.Kind == nil {
		return
	}
	if k := c.d.Kind(r); k != "" {
		c.seen[k]++
	}
}

// check fails tb if a kind of Covers was not seen.
func (c *coverage) check(tb testing.TB) {
	tb.Helper()
	var missing []string
	for _, k := range c.d.Covers {
		if c.seen[k] == 0 {
			missing = append(missing, k)
		}
	}
	if missing != nil {
		tb.Errorf("the commands never wrote %q (wrote %v): the check does not cover them", missing, c.seen)
	}
}

// walRecords returns the records of n's WAL after idx that ext owns,
// counted in cov (if not nil).
func walRecords(tb testing.TB, n *Node, ext actors.Extension, after uint64, cov *coverage) []seqRecord {
	tb.Helper()
	var out []seqRecord
	err := n.Log.Replay(after, func(seq uint64, r wal.Record) error {
		if ext.Owns(r.Type) {
			if cov != nil {
				cov.see(r)
			}
			out = append(out, seqRecord{seq, wal.Record{Type: r.Type, Data: slices.Clone(r.Data)}})
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("WAL replay after %d: %v", after, err)
	}
	return out
}

type seqRecord struct {
	seq uint64
	rec wal.Record
}

// image is the section of a fresh OfflineImage of ext restored from
// section and fed recs.
func image(tb testing.TB, ext actors.Extension, section []byte, recs []seqRecord) []byte {
	tb.Helper()
	return imageOf(tb, ext.(actors.OfflineImager).OfflineImage(), section, recs)
}

// imageOf is the section of oi, which must be fresh, restored from
// section and fed recs.
func imageOf(tb testing.TB, oi actors.OfflineImage, section []byte, recs []seqRecord) []byte {
	tb.Helper()
	if err := oi.Restore(section); err != nil {
		tb.Fatalf("OfflineImage.Restore: %v", err)
	}
	for _, r := range recs {
		if err := oi.Apply(r.seq, r.rec); err != nil {
			tb.Fatalf("OfflineImage.Apply(%d): %v", r.seq, err)
		}
	}
	b, err := oi.Section()
	if err != nil {
		tb.Fatalf("OfflineImage.Section: %v", err)
	}
	return b
}

// same fails tb if two canonical sections differ.
func (d Domain) same(tb testing.TB, what string, want, got []byte) bool {
	tb.Helper()
	w, g := d.canon(tb, want), d.canon(tb, got)
	if bytes.Equal(w, g) {
		return true
	}
	tb.Errorf("%s: the state differs (want, then got):\n%s\n%s", what, indent(w), indent(g))
	return false
}

func indent(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", " ") != nil {
		return string(b)
	}
	return out.String()
}

// checkRestore: restore + replay == live, after every step, from the WAL
// alone first and then from snapshots, by crashes and clean stops.
func checkRestore(t *testing.T, d Domain) {
	n, drv := d.Start(t)
	cov := &coverage{d: d, seen: map[string]int{}}
	every := d.SnapshotEvery
	if every <= 0 {
		every = 2
	}
	for i := range d.steps() {
		drv.Step(t, i)
		if s, ok := drv.(Settler); ok {
			s.Settle(t)
		}
		cov.scan(t, n, d.ext(n))
		if i > 0 && i%every == 0 {
			idx, err := n.Sys.Snapshot()
			if err != nil {
				t.Fatalf("step %d: Snapshot: %v", i, err)
			}
			cov.last = max(cov.last, idx) // the WAL is truncated up to it
		}
		_, live := d.capture(t, n, drv)
		var before any
		if d.Observe != nil {
			before = d.Observe(t, n)
		}
		how, stop := "crash", (*Node).Crash
		if i%3 == 2 {
			how, stop = "clean stop", (*Node).Stop
		}
		stop(n)
		n.Start()
		if idx, err := n.Log.LastIndex(); err == nil { // a clean stop's snapshot truncated the WAL
			cov.last = max(cov.last, idx)
		}
		_, got := d.capture(t, n, drv)
		what := fmt.Sprintf("step %d: %s and restore", i, how)
		if !d.same(t, what, live, got) {
			t.FailNow()
		}
		if d.AfterRestore != nil {
			d.AfterRestore(t, what, before, n)
		}
	}
	cov.check(t)
}

// checkOffline: OfflineImage from the last snapshot's section and the
// WAL after it == Capture, after every step.
func checkOffline(t *testing.T, d Domain) {
	n, drv := d.Start(t)
	if _, ok := d.ext(n).(actors.OfflineImager); !ok {
		t.Skip("no OfflineImager")
	}
	cov := &coverage{d: d, seen: map[string]int{}}
	var base []byte
	var baseIdx uint64
	for i := range d.steps() {
		drv.Step(t, i)
		if s, ok := drv.(Settler); ok {
			s.Settle(t)
		}
		cov.scan(t, n, d.ext(n))
		if i%3 == 1 { // a snapshot, whose section is the capture at its index
			d.capture(t, n, drv)
			idx, err := n.Sys.Snapshot()
			if err != nil {
				t.Fatalf("step %d: Snapshot: %v", i, err)
			}
			if base, err = d.ext(n).Capture(Ctx(t)); err != nil {
				t.Fatal(err)
			}
			baseIdx = idx
			cov.last = max(cov.last, idx) // the WAL is truncated up to it
		}
		_, live := d.capture(t, n, drv)
		recs := walRecords(t, n, d.ext(n), baseIdx, nil)
		off := image(t, d.ext(n), base, recs)
		if !d.same(t, fmt.Sprintf("step %d: OfflineImage (snapshot at %d, then the WAL) against Capture", i, baseIdx), live, off) {
			t.FailNow()
		}
	}
	cov.check(t)
}

// checkReplayRule: a section at any j >= k, then every record after k,
// equals the live state; over the driven commands and over Records.
func checkReplayRule(t *testing.T, d Domain) {
	n, drv := d.Start(t)
	ext := d.ext(n)
	if _, ok := ext.(actors.OfflineImager); !ok {
		t.Skip("no OfflineImager to restore sections off the actors")
	}
	cov := &coverage{d: d, seen: map[string]int{}}
	type cut struct {
		idx     uint64
		section []byte
	}
	cuts := []cut{{0, nil}}
	steps := d.steps()
	if d.CutSteps > 0 && d.CutSteps < steps {
		steps, cov.d.Covers = d.CutSteps, nil
	}
	for i := range steps {
		drv.Step(t, i)
		idx, section := d.capture(t, n, drv)
		cuts = append(cuts, cut{idx, section})
	}
	all := walRecords(t, n, ext, 0, cov)
	cov.check(t)
	live := cuts[len(cuts)-1].section
	for k := range cuts {
		after := recordsAfter(all, cuts[k].idx)
		for j := k; j < len(cuts); j++ {
			got := image(t, ext, cuts[j].section, after)
			if !d.same(t, fmt.Sprintf("driven: section after %d steps (index %d), then the records after index %d", j, cuts[j].idx, cuts[k].idx), live, got) {
				t.FailNow()
			}
		}
	}
	if d.Records == nil {
		return
	}
	var script []seqRecord
	for i, r := range d.Records(t) {
		script = append(script, seqRecord{uint64(i + 1), r})
	}
	newImage := ext.(actors.OfflineImager).OfflineImage
	if d.ScriptImage != nil {
		newImage = d.ScriptImage
	}
	sections := make([][]byte, len(script)+1) // after 0..n records
	for j := range sections {
		sections[j] = imageOf(t, newImage(), nil, script[:j])
	}
	want := sections[len(script)]
	for k := 0; k <= len(script); k++ {
		for j := k; j <= len(script); j++ {
			got := imageOf(t, newImage(), sections[j], script[k:])
			if !d.same(t, fmt.Sprintf("script: section at %d (barrier %d), then replay after %d", j, k, k), want, got) {
				t.FailNow()
			}
		}
	}
}

// recordsAfter returns the records of all with seq > idx.
func recordsAfter(all []seqRecord, idx uint64) []seqRecord {
	i, _ := slices.BinarySearchFunc(all, idx+1, func(r seqRecord, seq uint64) int {
		switch {
		case r.seq < seq:
			return -1
		case r.seq > seq:
			return 1
		}
		return 0
	})
	return all[i:]
}

// checkLiveApply: a follower given the writer's records through ApplyLive
// (once, then twice each on another follower unless d.LiveOnce) equals
// the writer after every step. The writer is a node on its own (its
// actors applied its records), as every node of a cluster is for the
// records it wrote.
func checkLiveApply(t *testing.T, d Domain) {
	for _, times := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d times", times), func(t *testing.T) {
			if times > 1 && d.LiveOnce {
				t.Skip("LiveOnce: the domain's ApplyLive counts a record each time")
			}
			w, drv := d.Start(t)
			if _, ok := d.ext(w).(actors.LiveApplier); !ok {
				t.Skip("no LiveApplier")
			}
			f, _ := d.Start(t, WithClock(w.Clock))
			cov := &coverage{d: d, seen: map[string]int{}}
			var last uint64
			for i := range d.steps() {
				drv.Step(t, i)
				if s, ok := drv.(Settler); ok {
					s.Settle(t)
				}
				recs := walRecords(t, w, d.ext(w), last, cov)
				for _, r := range recs {
					last = r.seq
					for range times {
						if err := d.ext(f).(actors.LiveApplier).ApplyLive(Ctx(t), r.seq, r.rec); err != nil {
							t.Fatalf("step %d: ApplyLive(%d): %v", i, r.seq, err)
						}
					}
				}
				_, want := d.capture(t, w, drv)
				got, err := d.ext(f).Capture(Ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("step %d: follower after ApplyLive of the writer's records (%d times each)", i, times)
				if !d.same(t, what, want, got) {
					t.FailNow()
				}
				if d.AfterApply != nil {
					d.AfterApply(t, what, w, f)
				}
			}
			cov.check(t)
		})
	}
}
