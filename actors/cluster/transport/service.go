package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Services: besides forwarded admissions, the transport carries plain
// request/response services other packages define (the blob copies of
// actors/gateway/blob/replica). A service is a name and a Handler; a node
// calls it on another node with Call. Requests and answers are opaque
// bytes: the service encodes them. Keep each message well under the
// transport's message limit (MaxMessage): protoactor batches the messages
// in flight to one node into one gRPC message.

// MaxMessage is the largest gRPC message a transport accepts (a batch of
// the messages in flight between two nodes).
const MaxMessage = 64 << 20

// Handler answers one request of a service. It runs on its own goroutine;
// ctx ends when the transport closes. An error is returned to the caller
// as its text (wrapped in ErrRemote).
type Handler func(ctx context.Context, req []byte) ([]byte, error)

var (
	// ErrCall reports a call that got no answer (timeout, no route, no such
	// service on the node): the handler may or may not have run.
	ErrCall = errors.New("transport: call failed")
	// ErrRemote reports a handler that answered with an error.
	ErrRemote = errors.New("transport: remote error")
)

// serviceActorName is the well-known name of a service's actor.
func serviceActorName(service string) string { return "gatehouse-svc-" + service }

// Handle serves service on this node with h, from now until Close. Call
// it once per service name, at start.
func (t *Transport) Handle(service string, h Handler) error {
	_, err := t.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &serviceActor{h: h, ctx: t.ctx}
	}), serviceActorName(service))
	if err != nil {
		return fmt.Errorf("transport: serve %s: %w", service, err)
	}
	return nil
}

// Call sends req to service on the node at addr and returns its answer,
// within ctx's deadline and at most timeout. No answer in time returns
// ErrCall; an error from the handler, ErrRemote with its text.
func (t *Transport) Call(ctx context.Context, addr, service string, req []byte, timeout time.Duration) ([]byte, error) {
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: %s to %s: %w", ErrCall, service, addr, context.DeadlineExceeded)
	}
	f := t.sys.Root.RequestFuture(actor.NewPID(addr, serviceActorName(service)), wrapperspb.Bytes(req), timeout)
	res, err := f.Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %s to %s: %w", ErrCall, service, addr, err)
	}
	b, ok := res.(*wrapperspb.BytesValue)
	if !ok || len(b.Value) == 0 {
		return nil, fmt.Errorf("%w: %s to %s: answer of type %T", ErrCall, service, addr, res)
	}
	switch b.Value[0] {
	case 'O':
		return b.Value[1:], nil
	case 'E':
		return nil, fmt.Errorf("%w: %s at %s: %s", ErrRemote, service, addr, b.Value[1:])
	}
	return nil, fmt.Errorf("%w: %s to %s: %w", ErrCall, service, addr, errWire)
}

// serviceActor runs each request of one service on its own goroutine (a
// handler may do disk or network I/O) and answers the caller from there.
type serviceActor struct {
	h   Handler
	ctx context.Context
}

func (s *serviceActor) Receive(c actor.Context) {
	m, ok := c.Message().(*wrapperspb.BytesValue)
	sender := c.Sender()
	if !ok || sender == nil {
		return // not a request: nothing to answer
	}
	root, h, ctx := c.ActorSystem().Root, s.h, s.ctx
	go func() {
		out, err := h(ctx, m.Value)
		var b []byte
		if err != nil {
			b = append([]byte{'E'}, err.Error()...)
		} else {
			b = append(append(make([]byte, 0, 1+len(out)), 'O'), out...)
		}
		root.Send(sender, wrapperspb.Bytes(b))
	}()
}
