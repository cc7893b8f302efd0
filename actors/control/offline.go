package control

import (
	"fmt"

	"gatehouse/actors"
	"gatehouse/wal"
)

var _ actors.OfflineImager = (*Control)(nil)

// OfflineImage returns an image of the control state built off the actor
// (cluster mode's snapshots): Restore and Apply as at start, into a state
// of its own, whose section is what Capture returns after the same
// records (actorstest.Conformance's offline-image check, conformance_test.go).
func (c *Control) OfflineImage() actors.OfflineImage { return &offlineImage{st: newState()} }

type offlineImage struct{ st *state }

func (o *offlineImage) Restore(section []byte) error {
	if section == nil {
		o.st = newState()
		return nil
	}
	st, err := decodeSection(section)
	if err != nil {
		return err
	}
	o.st = st
	return nil
}

func (o *offlineImage) Apply(seq uint64, r wal.Record) error {
	e, err := decodeEvent(r)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	if err := o.st.apply(e); err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	return nil
}

func (o *offlineImage) Section() ([]byte, error) { return o.st.encode(), nil }
