package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/actors/gateway/blob"
)

// Service is the transport service name a Store answers on (Serve).
const Service = "blob"

// ChunkSize is the largest chunk one request carries.
const ChunkSize = 256 << 10

// Member is a live cluster member: its node id and transport address.
type Member struct {
	ID, Addr string
}

// Caller calls a service on another node: the cluster transport
// (transport.Transport.Call).
type Caller interface {
	Call(ctx context.Context, addr, service string, req []byte, timeout time.Duration) ([]byte, error)
}

// Config wires a Store. Local, NodeID, Addr, Members and Transport are
// required; the durations default as documented.
type Config struct {
	// Local is this node's blob store.
	Local *blob.Store
	// NodeID is this node's id (left out of Members' answers) and Addr its
	// transport address, which a member asked for a copy pulls from.
	NodeID, Addr string
	// Members lists the live members (this node may be among them); it is
	// asked at each Put and each fetch. It may return none (not joined).
	Members func() []Member
	// Transport carries the requests.
	Transport Caller
	// PushTimeout bounds a Put's copy to another member, all members tried
	// (default 30 s; the caller's context may end it sooner).
	PushTimeout time.Duration
	// FetchTimeout bounds one fetch of a missing blob, all members tried
	// (default 30 s), and a copy pulled in for another node's Put.
	FetchTimeout time.Duration
	// CallTimeout bounds one request (one chunk; default 5 s).
	CallTimeout time.Duration
	// MaxSize is the largest blob fetched (default 1 GiB).
	MaxSize int64
	// CopyGrace: Collect keeps a blob pulled in for another node's Put for
	// this long before the cut (default 10 min; see the package comment).
	CopyGrace time.Duration
	// Logger (nil: discarded) and Registerer (nil: metrics unregistered).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() (Config, error) {
	if c.Local == nil || c.NodeID == "" || c.Addr == "" || c.Members == nil || c.Transport == nil {
		return c, errors.New("replica: Local, NodeID, Addr, Members and Transport are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PushTimeout, 30*time.Second)
	def(&c.FetchTimeout, 30*time.Second)
	def(&c.CallTimeout, 5*time.Second)
	def(&c.CopyGrace, 10*time.Minute)
	if c.MaxSize <= 0 {
		c.MaxSize = 1 << 30
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Store is a blob.Store whose Puts are copied to another member before
// they return and whose Opens fetch what is missing; see the package
// comment. Safe for concurrent use.
type Store struct {
	cfg Config
	loc *blob.Store
	lg  *slog.Logger
	m   *metrics

	mu       sync.Mutex
	flights  map[blob.Ref]*flight   // fetches running, by ref
	pulledIn map[blob.Ref]time.Time // copies pulled in for another node's Put, when
	cuts     map[blob.Cut]time.Time // Cuts not yet Collected, when taken
	notes    int                    // notePulledIn calls, for its pruning
}

// flight is one fetch of a ref; waiters read err once done is closed.
type flight struct {
	done chan struct{}
	err  error
}

// New returns a Store over cfg.Local. Serve it on the transport:
// tr.Handle(replica.Service, st.Serve).
func New(cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, loc: cfg.Local, lg: cfg.Logger.With("component", "blob-replica"), m: m,
		flights: map[blob.Ref]*flight{}, pulledIn: map[blob.Ref]time.Time{}, cuts: map[blob.Cut]time.Time{}}, nil
}

// Local is the node's own blob store.
func (s *Store) Local() *blob.Store { return s.loc }

// Put stores r's bytes here (blob.Store.Put) and copies them to one other
// live member before it returns. If no member takes a copy within
// PushTimeout and ctx, it returns an error wrapping blob.ErrUnavailable
// and holds nothing. On success the blob is held until Release.
func (s *Store) Put(ctx context.Context, r io.Reader, limit int64) (blob.Ref, int64, error) {
	ref, size, err := s.loc.Put(r, limit)
	if err != nil {
		return blob.Ref{}, 0, err
	}
	if err := s.push(ctx, ref, size); err != nil {
		s.loc.Release(ref)
		s.m.pushes.WithLabelValues("failed").Inc()
		s.lg.Warn("upload refused: no second copy", "ref", ref.String(), "size", size, "err", err)
		return blob.Ref{}, 0, err
	}
	s.m.pushes.WithLabelValues("ok").Inc()
	return ref, size, nil
}

// push asks the other members, in rendezvous order, to pull a copy of ref
// until one has it.
func (s *Store) push(ctx context.Context, ref blob.Ref, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PushTimeout)
	defer cancel()
	peers := s.peers(ref)
	if len(peers) == 0 {
		return fmt.Errorf("replica: no other cluster member is alive to hold a second copy of the upload (cluster mode keeps every blob on two nodes): %w", blob.ErrUnavailable)
	}
	req := encodeCopy(ref, size, s.cfg.Addr)
	var last error
	for _, p := range peers {
		// A short probe first (a chunk request, answered at once), so that
		// a member down costs CallTimeout, not the whole PushTimeout.
		_, err := s.cfg.Transport.Call(ctx, p.Addr, Service, encodeGet(ref, 0, 0), s.cfg.CallTimeout)
		if err == nil {
			// The member's pull is bounded by its own FetchTimeout.
			_, err = s.cfg.Transport.Call(ctx, p.Addr, Service, req, s.cfg.FetchTimeout+time.Second)
		}
		if err == nil {
			s.lg.Debug("blob copied", "ref", ref.String(), "member", p.ID)
			return nil
		}
		s.m.peerFailures.WithLabelValues("push", "error").Inc()
		s.lg.Warn("member did not take a copy of a blob", "ref", ref.String(), "member", p.ID, "err", err)
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("replica: no other cluster member took a copy of the upload within %s (%d tried; last: %w): %w",
		s.cfg.PushTimeout, len(peers), last, blob.ErrUnavailable)
}

// Release ends Put's hold (blob.Store.Release).
func (s *Store) Release(ref blob.Ref) { s.loc.Release(ref) }

// Open opens ref here, fetching it from the other members first if it is
// missing (see the package comment): blob.ErrNotFound if every member
// answered it has none, an error wrapping blob.ErrUnavailable if some
// could not be asked.
func (s *Store) Open(ctx context.Context, ref blob.Ref) (*blob.Reader, error) {
	rd, err := s.loc.Open(ref)
	if !errors.Is(err, blob.ErrNotFound) {
		return rd, err
	}
	if err := s.fetch(ctx, ref, ""); err != nil {
		return nil, err
	}
	return s.loc.Open(ref)
}

// fetch gets ref from the members (from first, if given) into the local
// store, once per ref at a time: a caller that finds a fetch of ref
// running waits for it (or for its ctx).
func (s *Store) fetch(ctx context.Context, ref blob.Ref, from string) error {
	s.mu.Lock()
	f := s.flights[ref]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flights[ref] = f
		go func() {
			err := s.fetchNow(ref, from)
			s.mu.Lock()
			delete(s.flights, ref)
			s.mu.Unlock()
			f.err = err
			close(f.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("replica: fetch %s: %w: %w", ref, ctx.Err(), blob.ErrUnavailable)
	}
}

// fetchNow runs one fetch, detached from its callers' contexts (they may
// give up; the fetch goes on for the others, within FetchTimeout).
func (s *Store) fetchNow(ref blob.Ref, from string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.FetchTimeout)
	defer cancel()
	var addrs []Member
	if from != "" {
		addrs = append(addrs, Member{ID: "uploader at " + from, Addr: from})
	}
	for _, p := range s.peers(ref) {
		if p.Addr != from {
			addrs = append(addrs, p)
		}
	}
	var errs []error
	for _, p := range addrs {
		err := s.pull(ctx, p.Addr, ref)
		if err == nil {
			s.m.fetches.WithLabelValues("ok").Inc()
			if from == "" {
				s.lg.Info("fetched a missing blob", "ref", ref.String(), "member", p.ID)
			}
			return nil
		}
		if errors.Is(err, errAbsent) {
			continue
		}
		reason := "error"
		if errors.Is(err, blob.ErrCorrupt) {
			reason = "corrupt"
		}
		s.m.peerFailures.WithLabelValues("fetch", reason).Inc()
		s.lg.Warn("member failed a blob fetch", "ref", ref.String(), "member", p.ID, "err", err)
		errs = append(errs, fmt.Errorf("%s: %w", p.ID, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		s.m.fetches.WithLabelValues("not_found").Inc()
		return fmt.Errorf("replica: fetch %s: no member has it (%d asked): %w", ref, len(addrs), blob.ErrNotFound)
	}
	s.m.fetches.WithLabelValues("failed").Inc()
	return fmt.Errorf("replica: fetch %s: %w: %w", ref, errors.Join(errs...), blob.ErrUnavailable)
}

// errAbsent: the member asked has no copy.
var errAbsent = errors.New("replica: member has no copy")

// pull copies ref from the member at addr through the local PutRef (which
// verifies it), then releases the hold PutRef took.
func (s *Store) pull(ctx context.Context, addr string, ref blob.Ref) error {
	cr := &chunkReader{ctx: ctx, s: s, addr: addr, ref: ref}
	if err := cr.next(); err != nil { // the first chunk says the size
		return err
	}
	if cr.size > s.cfg.MaxSize {
		return fmt.Errorf("%d bytes, more than the %d fetched", cr.size, s.cfg.MaxSize)
	}
	if _, err := s.loc.PutRef(cr, ref, cr.size); err != nil {
		return err
	}
	s.loc.Release(ref)
	return nil
}

// chunkReader reads a blob from a member, one chunk request at a time.
type chunkReader struct {
	ctx  context.Context
	s    *Store
	addr string
	ref  blob.Ref
	off  int64 // of the next chunk to ask for
	size int64 // the blob's, as the member said
	buf  []byte
}

// next asks for the chunk at off.
func (c *chunkReader) next() error {
	out, err := c.s.cfg.Transport.Call(c.ctx, c.addr, Service, encodeGet(c.ref, c.off, ChunkSize), c.s.cfg.CallTimeout)
	if err != nil {
		return err
	}
	found, size, data, err := decodeChunk(out)
	switch {
	case err != nil:
		return err
	case !found:
		return errAbsent
	case c.off > 0 && size != c.size:
		return fmt.Errorf("member says %d bytes, then %d: %w", c.size, size, blob.ErrCorrupt)
	case len(data) == 0 && c.off < size:
		return fmt.Errorf("empty chunk at %d of %d: %w", c.off, size, blob.ErrCorrupt)
	}
	c.size, c.buf = size, data
	c.off += int64(len(data))
	c.s.m.bytes.WithLabelValues("in").Add(float64(len(data)))
	return nil
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.off >= c.size {
			return 0, io.EOF
		}
		if err := c.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// peers returns the live members other than this node, in rendezvous
// order of ref: the order pushes and fetches try them, so that a fetch
// asks first the member a push most likely chose.
func (s *Store) peers(ref blob.Ref) []Member {
	var ms []Member
	for _, m := range s.cfg.Members() {
		if m.ID != s.cfg.NodeID && m.Addr != "" {
			ms = append(ms, m)
		}
	}
	score := func(m Member) uint64 {
		h := fnv.New64a()
		h.Write(ref[:])
		h.Write([]byte(m.ID))
		return h.Sum64()
	}
	slices.SortFunc(ms, func(a, b Member) int {
		sa, sb := score(a), score(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
	return ms
}

// Serve answers another node's requests (the transport's Handler for
// Service): a chunk of a local copy, or a copy to pull for its Put.
func (s *Store) Serve(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < 1+len(blob.Ref{}) {
		return nil, errWire
	}
	var ref blob.Ref
	copy(ref[:], req[1:])
	rest := req[1+len(ref):]
	switch req[0] {
	case 'G':
		off, n1 := binary.Uvarint(rest)
		if n1 <= 0 {
			return nil, errWire
		}
		lim, n2 := binary.Uvarint(rest[n1:])
		if n2 <= 0 || off > 1<<62 {
			return nil, errWire
		}
		return s.serveChunk(ref, int64(off), int(min(lim, ChunkSize)))
	case 'C':
		size, n := binary.Uvarint(rest)
		if n <= 0 || len(rest) == n {
			return nil, errWire
		}
		return nil, s.takeCopy(ctx, ref, int64(size), string(rest[n:]))
	}
	return nil, errWire
}

// serveChunk answers up to n bytes of the local copy of ref from off.
func (s *Store) serveChunk(ref blob.Ref, off int64, n int) ([]byte, error) {
	rd, err := s.loc.Open(ref)
	if errors.Is(err, blob.ErrNotFound) {
		return []byte{0}, nil
	}
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	size := rd.Size()
	out := binary.AppendUvarint([]byte{1}, uint64(size))
	if off >= size {
		return out, nil
	}
	head := len(out)
	out = append(out, make([]byte, min(int64(n), size-off))...)
	k, err := rd.ReadAt(out[head:], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	s.m.bytes.WithLabelValues("out").Add(float64(k))
	return out[:head+k], nil
}

// ErrNotMember refuses a copy asked to be pulled from an address that is
// not a current member's.
var ErrNotMember = errors.New("replica: not a current cluster member")

// takeCopy pulls ref from the node at from (falling back to the other
// members) unless an intact copy is here already, for that node's Put.
// from must be a current member's address: a node pulls from members
// only, so a message cannot make it fetch and store what another address
// serves.
func (s *Store) takeCopy(ctx context.Context, ref blob.Ref, size int64, from string) error {
	if !s.isMember(from) {
		s.m.fetches.WithLabelValues("refused").Inc()
		s.lg.Warn("refused to pull a copy from an address that is not a member", "ref", ref.String(), "from", from)
		return fmt.Errorf("copy of %s from %s: %w", ref, from, ErrNotMember)
	}
	if st, err := s.loc.Stat(ref); err == nil && st == size && s.loc.Verify(ref) == nil {
		s.notePulledIn(ref)
		return nil
	}
	if err := s.fetch(ctx, ref, from); err != nil {
		return err
	}
	s.notePulledIn(ref)
	return nil
}

// isMember reports whether addr is the transport address of a live
// member other than this node.
func (s *Store) isMember(addr string) bool {
	for _, m := range s.cfg.Members() {
		if m.Addr == addr && m.ID != s.cfg.NodeID {
			return true
		}
	}
	return false
}

// notePulledIn records a copy pulled in for another node's Put, for
// Collect. Without collections (cluster mode takes no snapshots yet) the
// record would grow forever: every 256 copies it forgets those older than
// CopyGrace before the oldest Cut not yet collected (or now), which no
// Collect can need.
func (s *Store) notePulledIn(ref blob.Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.pulledIn[ref] = now
	if s.notes++; s.notes%256 != 0 {
		return
	}
	oldest := now
	for _, at := range s.cuts {
		if at.Before(oldest) {
			oldest = at
		}
	}
	for r, t := range s.pulledIn {
		if t.Before(oldest.Add(-s.cfg.CopyGrace)) {
			delete(s.pulledIn, r)
		}
	}
}

// Cut starts a new generation of the local store (blob.Store.Cut) and
// remembers when, for Collect's grace.
func (s *Store) Cut() blob.Cut {
	c := s.loc.Cut()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cuts[c] = time.Now()
	return c
}

// Collect is blob.Store.Collect, keeping also the copies pulled in for
// other nodes' Puts less than CopyGrace before c was taken.
func (s *Store) Collect(c blob.Cut, keep func(blob.Ref) bool) (int, error) {
	s.mu.Lock()
	at, ok := s.cuts[c]
	delete(s.cuts, c)
	if !ok {
		at = time.Now() // a Cut not taken through s: protect every recent copy
	}
	since := at.Add(-s.cfg.CopyGrace)
	recent := map[blob.Ref]bool{}
	for r, t := range s.pulledIn {
		if t.After(since) {
			recent[r] = true
		} else {
			delete(s.pulledIn, r)
		}
	}
	s.mu.Unlock()
	return s.loc.Collect(c, func(r blob.Ref) bool { return recent[r] || keep(r) })
}

// Wire format (the transport's request and answer bytes):
//
//	get:   'G' | ref (32 bytes) | uvarint offset | uvarint max bytes
//	chunk: 0 (no copy here) | 1 | uvarint blob size | bytes
//	copy:  'C' | ref | uvarint size | the asking node's transport address
//	       (answered empty once the copy is durable, or with an error)

var errWire = errors.New("replica: malformed message")

func encodeGet(ref blob.Ref, off int64, n int) []byte {
	b := append([]byte{'G'}, ref[:]...)
	b = binary.AppendUvarint(b, uint64(off))
	return binary.AppendUvarint(b, uint64(n))
}

func encodeCopy(ref blob.Ref, size int64, from string) []byte {
	b := append([]byte{'C'}, ref[:]...)
	b = binary.AppendUvarint(b, uint64(size))
	return append(b, from...)
}

func decodeChunk(b []byte) (found bool, size int64, data []byte, err error) {
	if len(b) == 1 && b[0] == 0 {
		return false, 0, nil, nil
	}
	if len(b) < 2 || b[0] != 1 {
		return false, 0, nil, errWire
	}
	v, n := binary.Uvarint(b[1:])
	if n <= 0 || v > 1<<62 {
		return false, 0, nil, errWire
	}
	return true, int64(v), b[1+n:], nil
}
