package gateway

import (
	"fmt"

	"gatehouse/actors"
	"gatehouse/wal"
)

var _ actors.OfflineImager = (*Gateway)(nil)

// OfflineImage returns an image of the gateway's state built off its
// actors (cluster mode's snapshots): the restore path, Restore then Apply,
// into a state of its own, whose section (state.encode) is what Capture
// gathers from the actors after the same records (TestLiveEqualsRestore
// replays through it).
func (g *Gateway) OfflineImage() actors.OfflineImage {
	return &offlineImage{cfg: g.cfg, st: newState(g.cfg)}
}

type offlineImage struct {
	cfg Config
	st  *state
}

func (o *offlineImage) Restore(section []byte) error {
	o.st = newState(o.cfg)
	if section == nil {
		return nil
	}
	return restoreSection(section, o.st)
}

func (o *offlineImage) Apply(seq uint64, r wal.Record) error {
	ev, err := decodeEvent(r)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	o.st.apply(seq, ev)
	return nil
}

func (o *offlineImage) Section() ([]byte, error) { return o.st.encode(), nil }
