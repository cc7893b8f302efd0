package keys

import (
	"bytes"
	"fmt"
	"gatehouse/actors"
	"gatehouse/wal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
)

// image is the whole durable state outside any actor: what restore builds
// from a snapshot plus the WAL, before the actors that will own it start.
// Keys are already partitioned by home shard, hashes by directory shard.
type image struct {
	keys  []*keyTable
	dirs  []*dirTable
	nkeys int
	ext   map[string][]byte // extension sections by name
}

func newImage(shards, sizeHint int) *image {
	im := &image{
		keys: make([]*keyTable, shards),
		dirs: make([]*dirTable, shards),
	}
	for i := range shards {
		im.keys[i] = newKeyTable(sizeHint / shards)
		im.dirs[i] = newDirTable(sizeHint / shards)
	}
	return im
}

func (im *image) key(id uuid.UUID) *keyState {
	if sl := im.keys[shardOfID(id, len(im.keys))].get(id); sl != nil {
		return &sl.st
	}
	return nil
}

// applyDir applies directory effects to the image's directory maps.
func (im *image) applyDir(fx dirEffects) {
	n := len(im.dirs)
	for _, h := range fx.drop {
		im.dirs[shardOfHash(h, n)].del(h, fx.id)
	}
	for _, h := range fx.add {
		im.dirs[shardOfHash(h, n)].put(h, fx.id)
	}
}

// apply replays one WAL record. Records already reflected in the snapshot
// (see keyState.skip) are skipped, so replay never counts anything twice.
func (im *image) apply(seq uint64, r wal.Record) error {
	if r.Type == actors.TypeBarrier {
		return nil
	}
	if r.Type == recKeysUsed {
		batch, err := decodeKeysUsed(r.Data)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		for _, ev := range batch {
			im.applyKey(seq, ev)
		}
		return nil
	}
	ev, ok, err := decodeKeyEvent(r)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	if !ok {
		return fmt.Errorf("seq %d: unknown record type %d: %w", seq, r.Type, actors.ErrCorrupt)
	}
	im.applyKey(seq, ev)
	return nil
}

// applyKey replays one key event through applyKey, the same transition
// the live actors use, then the directory effects it returns.
func (im *image) applyKey(seq uint64, ev keyEvent) {
	id := ev.keyID()
	keys := im.keys[shardOfID(id, len(im.keys))]
	var st *keyState
	if sl := keys.get(id); sl != nil {
		st = &sl.st
	}
	next, fx, _ := applyKey(st, seq, ev) // an event refused live was never logged; refused here, it is a no-op
	switch {
	case st == nil && next != nil:
		keys.put(&slot{st: *next})
		im.nkeys++
	case st != nil && next == nil:
		keys.del(id)
		im.nkeys--
	}
	im.applyDir(fx)
}

// sectionKeys is the keys' section name in snapshots.
const sectionKeys = "keys"

// minKeyBytes is less than the smallest encoded keyState (two ids and a hash
// alone take 64 bytes); it bounds counts read from untrusted input.
const minKeyBytes = 64

// encodedKeyEstimate sizes capture buffers (a key with a week of usage
// encodes to about 230 bytes).
const encodedKeyEstimate = 256

func encodeKeyState(w *enc, s *keyState) {
	encodeKeyRecord(w, &s.rec)
	w.varint(s.use.total)
	w.varint(s.use.lastUsed)
	w.uvarint(uint64(len(s.use.days)))
	for _, d := range s.use.days {
		w.varint(int64(d.day()))
		w.varint(d.n())
	}
	if s.win == nil {
		w.uvarint(0)
	} else {
		w.uvarint(uint64(s.win.Len()))
		s.win.Each(func(sec int64, n uint32) {
			w.varint(sec)
			w.uvarint(uint64(n))
		})
	}
	w.uvarint(s.applied)
	w.uvarint(s.usageSeq)
}

func decodeKeyState(d *dec, s *keyState) {
	decodeKeyRecord(d, &s.rec)
	s.use.total = d.varint()
	s.use.lastUsed = d.varint()
	if n := d.count(2); n > 0 {
		s.use.days = d.ar.days(n)
		for i := range s.use.days {
			day, c := d.varint(), d.varint()
			if day < minDay || day > maxDay || c < 0 || c > dayCountMask {
				d.fail("usage day")
				break
			}
			s.use.days[i] = mkDayCount(int32(day), c)
		}
	}
	for range d.count(2) {
		sec, n := d.varint(), d.uvarint()
		if n == 0 || n > 1<<32-1 {
			d.fail("window count")
			break
		}
		s.window().Add(sec, uint32(n))
	}
	s.applied = d.uvarint()
	s.usageSeq = d.uvarint()
}

// keysSection frames the key blocks (total keys in all).
func keysSection(blocks []keyBlock, total int) actors.Section {
	parts := make([][]byte, 0, 2*len(blocks)+2)
	var w enc
	w.uvarint(uint64(total))
	parts = append(parts, w.b)
	for _, b := range blocks {
		if b.count == 0 {
			continue
		}
		w = enc{}
		w.uvarint(uint64(b.count))
		w.uvarint(uint64(len(b.buf)))
		parts = append(parts, w.b, b.buf)
	}
	return actors.Section{Name: sectionKeys, Parts: append(parts, []byte{0})}
}

// blocks encodes the keys, one block per shard.
func (im *image) blocks() ([]keyBlock, int) {
	blocks := make([]keyBlock, 0, len(im.keys))
	total := 0
	for _, t := range im.keys {
		w := enc{b: make([]byte, 0, t.len()*encodedKeyEstimate)}
		n := 0
		t.each(func(sl *slot) {
			encodeKeyState(&w, &sl.st)
			n++
		})
		blocks = append(blocks, keyBlock{count: n, buf: w.b})
		total += n
	}
	return blocks, total
}

// encode is im's snapshot payload with the extensions' sections by name:
// what a snapshot captured from actors holding im would hold (tests).
func (im *image) encode(names []string, sections [][]byte) []byte {
	blocks, total := im.blocks()
	secs := []actors.Section{keysSection(blocks, total)}
	for i, n := range names {
		secs = append(secs, actors.Section{Name: n, Parts: [][]byte{sections[i]}})
	}
	var buf bytes.Buffer
	if err := actors.WriteSnapshot(&buf, secs); err != nil {
		panic("actors: encode image: " + err.Error()) // a bytes.Buffer does not fail
	}
	return buf.Bytes()
}

// decodeImage parses a snapshot payload into an image for shards shards;
// the other sections (the extensions') are copied into im.ext (tests, and
// tools that read a payload whole).
func decodeImage(payload []byte, shards int) (*image, error) {
	secs, err := actors.DecodeSnapshot(payload)
	if err != nil {
		return nil, err
	}
	im := newImage(shards, 0)
	if ks := secs[sectionKeys]; ks != nil {
		if im, err = decodeKeys(ks, shards); err != nil {
			return nil, err
		}
	}
	im.ext = map[string][]byte{}
	for name, sc := range secs {
		if name != sectionKeys {
			im.ext[name] = bytes.Clone(sc)
		}
	}
	return im, nil
}

// decodeKeys decodes the keys' section into an image for shards shards,
// on every core; nothing keeps section.
func decodeKeys(section []byte, shards int) (*image, error) {
	var blocks []rawBlock
	d := &dec{b: section}
	total := d.count(minKeyBytes)
	for {
		count := d.uvarint()
		if d.err() != nil || count == 0 {
			break
		}
		b := d.view() // decoded before decodeKeys returns; nothing keeps it
		if count > uint64(len(b)/minKeyBytes) {
			return nil, fmt.Errorf("key block of %d keys in %d bytes: %w", count, len(b), actors.ErrCorrupt)
		}
		blocks = append(blocks, rawBlock{count: int(count), b: b})
	}
	if err := d.done("image keys"); err != nil {
		return nil, err
	}
	im := newImage(shards, total)
	if err := im.decodeBlocks(blocks); err != nil {
		return nil, err
	}
	if im.nkeys != total {
		return nil, fmt.Errorf("image has %d keys, header says %d: %w", im.nkeys, total, actors.ErrCorrupt)
	}
	return im, nil
}

// rawBlock is one undecoded block of keys.
type rawBlock struct {
	count int
	b     []byte
}

// dirItem is a directory entry on its way to its shard.
type dirItem struct {
	hash hash
	id   uuid.UUID
}

// decoded is what one decoding worker produced, sorted by target shard.
type decoded struct {
	keys [][]*slot
	dirs [][]dirItem
	ar   arena
	err  error
}

// arena carves the names and usage days of restored keys out of large
// chunks: a million keys are then a few hundred allocations instead of
// two million, each sized exactly instead of to its size class. A chunk
// lives while any key still uses a piece of it; a piece is never written
// beyond its own length (days are sliced to their capacity, so growing
// them copies), and strings are immutable.
type arena struct {
	sb strings.Builder
	dc []dayCount
}

const arenaChunk = 64 << 10

func (a *arena) str(b []byte) string {
	if a.sb.Cap()-a.sb.Len() < len(b) {
		a.sb = strings.Builder{}
		a.sb.Grow(max(arenaChunk, len(b)))
	}
	start := a.sb.Len()
	a.sb.Write(b)
	return a.sb.String()[start:]
}

// days returns a zeroed slice of n day counts; a nil arena allocates.
func (a *arena) days(n int) []dayCount {
	if a == nil {
		return make([]dayCount, n)
	}
	if cap(a.dc)-len(a.dc) < n {
		a.dc = make([]dayCount, 0, max(arenaChunk/8, n))
	}
	l := len(a.dc)
	a.dc = a.dc[:l+n]
	return a.dc[l : l+n : l+n]
}

// decodeBlocks decodes key blocks on every core, then fills each shard's maps
// from one goroutine per shard group: restore of 1M keys is bound by this.
func (im *image) decodeBlocks(blocks []rawBlock) error {
	n := len(im.keys)
	workers := min(runtime.GOMAXPROCS(0), max(len(blocks), 1))
	parts := make([]decoded, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &parts[w]
			p.keys, p.dirs = make([][]*slot, n), make([][]dirItem, n)
			for i := int(next.Add(1) - 1); i < len(blocks) && p.err == nil; i = int(next.Add(1) - 1) {
				p.err = p.decode(blocks[i], n)
			}
		}()
	}
	wg.Wait()
	for _, p := range parts {
		if p.err != nil {
			return p.err
		}
	}
	counts := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sh := w; sh < n; sh += workers {
				counts[w] += im.fill(sh, parts)
			}
		}()
	}
	wg.Wait()
	for _, c := range counts {
		im.nkeys += c
	}
	return nil
}

func (p *decoded) decode(blk rawBlock, n int) error {
	d := dec{b: blk.b, ar: &p.ar}
	slots := make([]slot, blk.count) // one allocation for the block's keys
	for i := range blk.count {
		x := &slots[i]
		if decodeKeyState(&d, &x.st); d.err() != nil {
			return d.err()
		}
		r := &x.st.rec
		p.keys[shardOfID(r.id, n)] = append(p.keys[shardOfID(r.id, n)], x)
		p.dirs[shardOfHash(r.hash, n)] = append(p.dirs[shardOfHash(r.hash, n)], dirItem{r.hash, r.id})
		if prev, ok := r.prev(); ok {
			p.dirs[shardOfHash(prev, n)] = append(p.dirs[shardOfHash(prev, n)], dirItem{prev, r.id})
		}
	}
	return d.done("key block")
}

// fill moves shard sh's keys and directory entries into its maps and
// returns how many distinct keys it holds.
func (im *image) fill(sh int, parts []decoded) int {
	keys, dir := im.keys[sh], im.dirs[sh]
	for _, p := range parts {
		for _, x := range p.keys[sh] {
			keys.put(x)
		}
		for _, e := range p.dirs[sh] {
			dir.put(e.hash, e.id)
		}
	}
	return keys.len()
}
