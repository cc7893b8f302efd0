// Package transport carries forwarded admissions between gatehouse nodes:
// the node a request reached asks the key's owner to admit it, over
// protoactor remote (plain request/response; not protoactor's cluster
// package, whose placement does not check ownership). It also carries
// named request/response services for other packages (Handle, Call): the
// blob copies between nodes.
//
// protoactor's Remote.Start replaces grpc's global logger, which races
// with any grpc traffic already running in the process: start the
// transport once, before the etcd client.
package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"gatehouse/actors/cluster/internal/wire"
)

// Verdict is an owner's answer to a forwarded admission: what the key's
// actor decided, with the figures the rate-limit headers carry.
type Verdict struct {
	Code       VerdictCode
	Limit      int64
	Remaining  int64
	Reset      int64
	RetryAfter int64
}

// VerdictCode says how a forwarded admission ended.
type VerdictCode uint8

const (
	// Admitted: the request may go upstream.
	Admitted VerdictCode = iota
	// Limited: the key's limit is reached (429).
	Limited
	// NotOwner: the node asked does not own the key's shard (any more):
	// the forwarder looks the owner up again.
	NotOwner
	// Unavailable: the owner cannot admit now (its reservation failed,
	// etcd is out of reach): fail closed.
	Unavailable
	// KeyInvalid, KeyRevoked, KeyExpired: the key is refused (401).
	KeyInvalid
	KeyRevoked
	KeyExpired
)

// Admitter admits one request for a key this node owns. It is the key
// actors, seen from the transport.
type Admitter interface {
	AdmitOwned(ctx context.Context, keyID string) Verdict
}

// Transport carries admissions from the node a request reached to the
// key's owner over protoactor remote (plain request/response, not its
// cluster package). A forward carries a request id, and the owner answers
// a repeated id from memory for a while, so one retry never counts a
// request twice.
type Transport struct {
	sys     *actor.ActorSystem
	rem     *remote.Remote
	addr    string
	timeout time.Duration
	self    *actor.PID
	// ctx is the services' (Handle): cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc
}

// admitActorName is the well-known name of the transport's actor.
const admitActorName = "gatehouse-admit"

// dedupeTTL is how long an owner remembers an answer by request id.
const dedupeTTL = 10 * time.Second

// ErrForward reports a forward that got no answer (timeout, no route): the
// owner may or may not have admitted.
var ErrForward = errors.New("transport: forward failed")

// Start listens on listen (host:port; port 0 picks one) and
// serves admissions for the keys this node owns through a. timeout
// bounds each forward. Without WithTLS every connection is plaintext
// and anything that reaches listen is heard (tests, cluster.insecure).
func Start(listen string, a Admitter, timeout time.Duration, lg *slog.Logger, opts ...Option) (*Transport, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// Listen first: remote.Start panics on a busy port, and replaces
	// grpc's global logger before it tries (see the package comment).
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", listen, err)
	}
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	host, port := addr.IP.String(), addr.Port
	if lg == nil {
		lg = slog.Default()
	}
	quiet := lg.With("component", "cluster-transport")
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	// A batch of the messages in flight to one node travels as one gRPC
	// message: allow MaxMessage (services send chunks of up to 256 KiB).
	rem := remote.NewRemote(sys, remote.Configure(host, port, o.remoteOptions()...))
	if err := start(rem); err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", listen, err)
	}
	t := &Transport{sys: sys, rem: rem, addr: sys.Address(), timeout: timeout}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &admitServer{a: a, seen: map[dedupeKey]*seenEntry{}}
	}), admitActorName)
	if err != nil {
		rem.Shutdown(false)
		return nil, fmt.Errorf("transport: start admission actor: %w", err)
	}
	t.self = pid
	return t, nil
}

// start runs rem.Start, which panics when it cannot listen.
func start(rem *remote.Remote) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	rem.Start()
	return nil
}

// Addr is the address other nodes reach this transport at.
func (t *Transport) Addr() string { return t.addr }

// Close stops the transport.
func (t *Transport) Close() {
	t.cancel()
	t.rem.Shutdown(false)
}

// Forward asks the node at addr to admit one request for keyID, with the
// forwarding node's request id. A timeout returns ErrForward.
func (t *Transport) Forward(ctx context.Context, addr, keyID string, reqID uint64) (Verdict, error) {
	timeout := t.timeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return Verdict{}, fmt.Errorf("%w: %w", ErrForward, context.DeadlineExceeded)
	}
	msg := wrapperspb.Bytes(encodeAdmit(t.addr, reqID, keyID))
	res, err := t.sys.Root.RequestFuture(actor.NewPID(addr, admitActorName), msg, timeout).Result()
	if err != nil {
		return Verdict{}, fmt.Errorf("%w to %s: %w", ErrForward, addr, err)
	}
	b, ok := res.(*wrapperspb.BytesValue)
	if !ok {
		return Verdict{}, fmt.Errorf("%w: answer of type %T", ErrForward, res)
	}
	return decodeVerdict(b.Value)
}

// admitServer is the transport's actor: it deduplicates by request id and
// runs each admission outside its own mailbox (an admission waits for a
// key actor, possibly for a reservation).
type admitServer struct {
	a    Admitter
	seen map[dedupeKey]*seenEntry
	gc   time.Time
}

type dedupeKey struct {
	from string
	id   uint64
}

type seenEntry struct {
	done    bool
	v       Verdict
	waiters []*actor.PID
	at      time.Time
}

type admitted struct {
	k dedupeKey
	v Verdict
}

func (s *admitServer) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *wrapperspb.BytesValue:
		from, id, keyID, err := decodeAdmit(m.Value)
		if err != nil || c.Sender() == nil {
			return // not ours: nothing to answer
		}
		now := time.Now()
		s.collect(now)
		k := dedupeKey{from, id}
		if e := s.seen[k]; e != nil {
			if e.done {
				c.Respond(wrapperspb.Bytes(encodeVerdict(e.v)))
			} else {
				e.waiters = append(e.waiters, c.Sender())
			}
			return
		}
		s.seen[k] = &seenEntry{waiters: []*actor.PID{c.Sender()}, at: now}
		self, root, a := c.Self(), c.ActorSystem().Root, s.a
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			root.Send(self, admitted{k: k, v: a.AdmitOwned(ctx, keyID)})
		}()
	case admitted:
		e := s.seen[m.k]
		if e == nil {
			return
		}
		e.done, e.v = true, m.v
		for _, w := range e.waiters {
			c.Send(w, wrapperspb.Bytes(encodeVerdict(m.v)))
		}
		e.waiters = nil
		if m.v.Code == NotOwner || m.v.Code == Unavailable {
			// Asked again, the request must be asked of the key actor
			// again: a shard still being taken answers "not the owner"
			// until it is, and remembering that answer would refuse
			// the forwarder's retries for as long as it is remembered.
			// "Not the owner" admitted nothing; "unavailable" may have
			// (an owner that gave up waiting for its key actor), so a
			// retry may count the request twice: under-admission, never
			// over.
			delete(s.seen, m.k)
		}
	}
}

// collect forgets answers older than dedupeTTL, at most once a second.
func (s *admitServer) collect(now time.Time) {
	if now.Sub(s.gc) < time.Second {
		return
	}
	s.gc = now
	for k, e := range s.seen {
		if e.done && now.Sub(e.at) > dedupeTTL {
			delete(s.seen, k)
		}
	}
}

// Wire format (inside a protobuf BytesValue, so protoactor's serializer
// carries it without generated code): an admission is
// 'A' | uvarint len(from) | from | uvarint reqID | keyID; a verdict is
// 'V' | code | varint limit, remaining, reset, retryAfter.

func encodeAdmit(from string, reqID uint64, keyID string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64*2+len(from)+len(keyID))
	b = append(b, 'A')
	b = binary.AppendUvarint(b, uint64(len(from)))
	b = append(b, from...)
	b = binary.AppendUvarint(b, reqID)
	return append(b, keyID...)
}

var errWire = errors.New("transport: malformed message")

func decodeAdmit(b []byte) (from string, reqID uint64, keyID string, err error) {
	if len(b) == 0 || b[0] != 'A' {
		return "", 0, "", errWire
	}
	r := wire.Reader{B: b[1:]}
	n := r.Uvarint()
	if r.Err || n > uint64(len(r.B)) {
		return "", 0, "", errWire
	}
	from, r.B = string(r.B[:n]), r.B[n:]
	reqID = r.Uvarint()
	if r.Err {
		return "", 0, "", errWire
	}
	return from, reqID, string(r.B), nil
}

func encodeVerdict(v Verdict) []byte {
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64)
	b = append(b, 'V', byte(v.Code))
	for _, x := range []int64{v.Limit, v.Remaining, v.Reset, v.RetryAfter} {
		b = binary.AppendVarint(b, x)
	}
	return b
}

func decodeVerdict(b []byte) (Verdict, error) {
	if len(b) < 2 || b[0] != 'V' || VerdictCode(b[1]) > KeyExpired {
		return Verdict{}, errWire
	}
	v := Verdict{Code: VerdictCode(b[1])}
	r := wire.Reader{B: b[2:]}
	v.Limit, v.Remaining, v.Reset, v.RetryAfter = r.Varint(), r.Varint(), r.Varint(), r.Varint()
	if r.Err || len(r.B) != 0 {
		return Verdict{}, errWire
	}
	return v, nil
}
