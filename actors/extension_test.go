package actors_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// counterExt is a minimal extension: one actor holding a counter that each
// add command logs (type 64) before applying.
type counterExt struct {
	total    uint64 // restored + replayed state, handed to the actor at Start
	pid      *actor.PID
	root     *actor.RootContext
	restored []byte
}

type counterAdd struct {
	n     uint64
	reply chan error
}

type counterGet struct{ reply chan uint64 }

type counterActor struct {
	log   actors.EventLog
	total uint64
}

func (a *counterActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case counterAdd:
		_, err := a.log.Append(wal.Record{Type: 64, Data: binary.AppendUvarint(nil, m.n)})
		if err == nil {
			a.total += m.n
		}
		m.reply <- err
	case counterGet:
		m.reply <- a.total
	}
}

func (c *counterExt) Name() string         { return "counter" }
func (c *counterExt) Owns(t wal.Type) bool { return t == 64 }
func (c *counterExt) Restore(section []byte) error {
	c.total, c.restored = 0, section
	if section != nil {
		v, n := binary.Uvarint(section)
		if n <= 0 {
			return fmt.Errorf("counter section: %w", actors.ErrCorrupt)
		}
		c.total = v
	}
	return nil
}
func (c *counterExt) Apply(_ uint64, r wal.Record) error {
	v, _ := binary.Uvarint(r.Data)
	c.total += v
	return nil
}
func (c *counterExt) Start(env actors.ExtensionEnv) error {
	a := &counterActor{log: env.Log, total: c.total}
	c.root, c.pid = env.Root, env.Root.Spawn(env.Props(func() actor.Actor { return a }))
	return nil
}
func (c *counterExt) Capture(ctx context.Context) ([]byte, error) {
	v, err := c.get(ctx)
	return binary.AppendUvarint(nil, v), err
}
func (c *counterExt) Stop() {}

func (c *counterExt) get(ctx context.Context) (uint64, error) {
	reply := make(chan uint64, 1)
	v, _, err := actors.Ask(ctx, c.root, c.pid, counterGet{reply: reply}, reply, nil)
	return v, err
}

func (c *counterExt) add(tb testing.TB, n uint64) {
	tb.Helper()
	reply := make(chan error, 1)
	if err, _, werr := actors.Ask(actorstest.Ctx(tb), c.root, c.pid, counterAdd{n: n, reply: reply}, reply, nil); err != nil || werr != nil {
		tb.Fatal(err, werr)
	}
}

func TestExtensionSnapshotAndReplay(t *testing.T) {
	n := actorstest.New(t)
	ext := &counterExt{}
	n.Extensions = func() []actors.Extension { return []actors.Extension{ext} } // one counter across restarts
	n.Start()
	ext.add(t, 2)
	ext.add(t, 3)
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	ext.add(t, 5) // after the snapshot: replayed
	n.Crash()
	n.Start()
	if got, _ := ext.get(actorstest.Ctx(t)); got != 10 || ext.restored == nil {
		t.Errorf("after crash counter = %d (section %v), want 10 from snapshot 5 + replay 5", got, ext.restored)
	}
	n.Stop()
	n.Start()
	if got, _ := ext.get(actorstest.Ctx(t)); got != 10 {
		t.Errorf("after clean restart counter = %d, want 10", got)
	}
}
