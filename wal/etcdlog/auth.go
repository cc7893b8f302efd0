package etcdlog

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Authentication of the log (docs/cluster.md, "Trust model"): every entry
// and every snapshot pointer ends with an HMAC-SHA256 under a key derived
// from the cluster's master key and the writer's node id,
//
//	HKDF-SHA256(master key, salt: none, info: "gatehouse etcdlog v2 writer " + writer)
//
// over the entry's name (writer, counter), its value before the MAC and,
// for an entry in parts or a snapshot, the whole batch or payload. A
// client of etcd without the master key can delete or withhold entries,
// but cannot write one a node applies: an entry whose MAC does not verify
// is skipped (never applied), counted in
// gatehouse_etcdlog_rejected_total and logged once per writer name.

// macSize is the length of an entry's or a pointer's MAC.
const macSize = sha256.Size

// ErrForged reports an entry or a snapshot whose MAC does not verify (or
// that has none, written before the log was authenticated, while
// Auth.AcceptUnauthenticated is off).
var ErrForged = errors.New("etcdlog: entry not authenticated by a cluster member")

// ErrLegacy reports an entry or a snapshot in the format written before
// the log was authenticated (always with ErrForged). Replay fails on such
// an entry (Follow skips it) unless Auth.AcceptUnauthenticated.
var ErrLegacy = errors.New("written without a MAC, before the log was authenticated: the log of a cluster upgraded " +
	"from a build before issue 31? Start every node once with cluster.etcd.accept_unauthenticated: true until a snapshot " +
	"was taken (docs/decisions.md), or it was forged by a client of etcd")

// Auth is what authenticates a log's entries and snapshots.
type Auth struct {
	// MasterKey is the cluster's master key (the same on every node);
	// required.
	MasterKey []byte
	// AcceptUnauthenticated applies entries and loads snapshots written
	// before the log was authenticated (format version 1, no MAC): for
	// the upgrade of a cluster only (docs/decisions.md). Off, they are
	// refused like forged ones.
	AcceptUnauthenticated bool
	// Logger gets one WARN per writer name whose entries are refused;
	// nil discards.
	Logger *slog.Logger
	// Registerer gets the log's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
}

// authenticator signs and verifies; safe for concurrent use.
type authenticator struct {
	master []byte
	legacy bool
	lg     *slog.Logger
	// rejected counts refused entries and snapshots, by kind.
	rejected *prometheus.CounterVec

	mu     sync.Mutex
	keys   map[string][]byte   // writer → MAC key
	warned map[string]struct{} // writers already logged
}

func newAuthenticator(a Auth) (*authenticator, error) {
	if len(a.MasterKey) == 0 {
		return nil, errors.New("etcdlog: Auth.MasterKey is required: entries are authenticated with a key derived from it")
	}
	lg := a.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_etcdlog_rejected_total",
		Help: "Entries (kind=entry) and snapshots (kind=snapshot) of the replicated log refused because their MAC does not verify or they have none.",
	}, []string{"kind"})
	if a.Registerer != nil {
		if err := a.Registerer.Register(rejected); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("etcdlog: register metrics: %w", err)
			}
			rejected = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return &authenticator{
		master: append([]byte(nil), a.MasterKey...), legacy: a.AcceptUnauthenticated,
		lg: lg.With("component", "etcdlog"), rejected: rejected,
		keys: map[string][]byte{}, warned: map[string]struct{}{},
	}, nil
}

// key returns writer's MAC key.
func (a *authenticator) key(writer string) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k, ok := a.keys[writer]; ok {
		return k
	}
	k, err := hkdf.Key(sha256.New, a.master, nil, "gatehouse etcdlog v2 writer "+writer, macSize)
	if err != nil {
		panic(err) // only for a length hkdf cannot give; macSize is fine
	}
	if len(a.keys) < 1024 { // forged writer names must not grow the cache without bound
		a.keys[writer] = k
	}
	return k
}

// mac is the MAC of kind's item named (writer, n), made of parts.
func (a *authenticator) mac(kind byte, writer string, n uint64, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, a.key(writer))
	h.Write([]byte{kind})
	h.Write(binary.AppendUvarint(nil, uint64(len(writer))))
	h.Write([]byte(writer))
	h.Write(binary.BigEndian.AppendUint64(nil, n))
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

const (
	macEntry    = 'e'
	macSnapshot = 's'
)

// verify checks sum against the MAC of the item.
func (a *authenticator) verify(sum []byte, kind byte, writer string, n uint64, parts ...[]byte) bool {
	return hmac.Equal(sum, a.mac(kind, writer, n, parts...))
}

// maxWarned bounds the writer names logged: beyond, refusals are only
// counted, so forged names cannot flood the log or grow the set.
const maxWarned = 1024

// reject counts a refused item and logs the first of each writer's.
func (a *authenticator) reject(kind, writer, key string, err error) {
	a.rejected.WithLabelValues(kind).Inc()
	a.mu.Lock()
	_, seen := a.warned[writer]
	switch {
	case seen:
	case len(a.warned) < maxWarned:
		a.warned[writer] = struct{}{}
	default:
		seen = true // so many names: a flood, counted only
	}
	a.mu.Unlock()
	if !seen {
		a.lg.Warn("refused an unauthenticated "+kind+" of the replicated log (not written by a cluster member, or before the log was authenticated); "+
			"further ones of this writer are counted in gatehouse_etcdlog_rejected_total, not logged",
			"writer", writer, "key", key, "err", err)
	}
}
