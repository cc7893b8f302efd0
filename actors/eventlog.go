package actors

import (
	"errors"
	"fmt"

	"gatehouse/wal"
)

// EventLog is what actors (and extensions) need from *wal.Log: Append is
// durable on return; AppendAsync reports the commit through done, called in
// sequence order on the WAL writer (it must not block).
type EventLog interface {
	Append(recs ...wal.Record) (last uint64, err error)
	AppendAsync(recs []wal.Record, done func(last uint64, err error))
}

var _ EventLog = (*wal.Log)(nil)

// eventLog is the EventLog every actor and extension gets: the WAL with
// its refusals (fail-stop after a disk error, closed at shutdown) turned
// into ErrUnavailable, which the APIs answer 503. Other errors (an
// invalid record: a bug) pass unchanged.
type eventLog struct{ l *wal.Log }

func (e eventLog) Append(recs ...wal.Record) (uint64, error) {
	last, err := e.l.Append(recs...)
	return last, unavailable(err)
}

func (e eventLog) AppendAsync(recs []wal.Record, done func(last uint64, err error)) {
	e.l.AppendAsync(recs, func(last uint64, err error) { done(last, unavailable(err)) })
}

func unavailable(err error) error {
	if errors.Is(err, wal.ErrFailed) || errors.Is(err, wal.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
