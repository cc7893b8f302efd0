package llm

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	brt "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

// bedrockDrain is how long a finished stream waits for the rest of its
// body (normally just its end) so the connection goes back to the pool.
const bedrockDrain = 50 * time.Millisecond

// converseStream runs ConverseStream, passing text deltas to onDelta and
// assembling tool calls and reasoning blocks. The SDK reads the frames
// in a goroutine of its own; the event loop here selects on ctx too, and
// closing the stream (deferred) closes the body, so a cancelled ctx
// returns at once mid-stream.
func (b *bedrock) converseStream(ctx context.Context, in *bedrockInput, onDelta OnDelta) (Result, error) {
	out, err := b.sdk.ConverseStream(ctx, in.stream())
	if err != nil {
		return Result{}, bedrockError(ctx, err)
	}
	es := out.GetStream()
	defer es.Close()
	st := bedrockStream{maxAnswer: b.maxAnswer, tools: map[int32]int{}, thinks: map[int32]int{}}
	events := es.Events()
	for {
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case ev, ok := <-events:
			if !ok {
				if err := es.Err(); err != nil {
					return Result{}, bedrockStreamError(ctx, err)
				}
				if ctx.Err() != nil {
					return Result{}, ctx.Err()
				}
				if !st.stopped {
					return Result{}, Malformed("bedrock: stream ended before messageStop")
				}
				return st.result(), nil
			}
			if err := st.event(ev, onDelta); err != nil {
				return Result{}, err
			}
			if st.stopped && st.metadata {
				bedrockWaitEnd(events)
				return st.result(), nil
			}
		}
	}
}

// bedrockWaitEnd waits briefly for the SDK to read the body to its end.
func bedrockWaitEnd(events <-chan brt.ConverseStreamOutput) {
	t := time.NewTimer(bedrockDrain)
	defer t.Stop()
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}

// bedrockStream assembles one streamed answer.
type bedrockStream struct {
	maxAnswer int
	size      int
	text      strings.Builder
	calls     []ToolCall
	args      []strings.Builder
	tools     map[int32]int // contentBlockIndex → calls index
	thinking  []Thinking
	redacted  [][]byte
	thinks    map[int32]int // contentBlockIndex → thinking index
	stop      brt.StopReason
	stopped   bool
	metadata  bool
	usage     *brt.TokenUsage
}

func (s *bedrockStream) grow(n int) error {
	s.size += n
	if s.size > s.maxAnswer {
		return TooLarge(s.maxAnswer)
	}
	return nil
}

func (s *bedrockStream) event(ev brt.ConverseStreamOutput, onDelta OnDelta) error {
	switch v := ev.(type) {
	case *brt.ConverseStreamOutputMemberContentBlockStart:
		if tu, ok := v.Value.Start.(*brt.ContentBlockStartMemberToolUse); ok {
			c := ToolCall{ID: bedrockCallID(aws.ToString(tu.Value.ToolUseId)), Type: "function",
				Function: ToolFunction{Name: aws.ToString(tu.Value.Name)}}
			if err := s.grow(len(c.ID) + len(c.Function.Name)); err != nil {
				return err
			}
			s.tools[aws.ToInt32(v.Value.ContentBlockIndex)] = len(s.calls)
			s.calls = append(s.calls, c)
			s.args = append(s.args, strings.Builder{})
		}
	case *brt.ConverseStreamOutputMemberContentBlockDelta:
		return s.delta(aws.ToInt32(v.Value.ContentBlockIndex), v.Value.Delta, onDelta)
	case *brt.ConverseStreamOutputMemberMessageStop:
		s.stop, s.stopped = v.Value.StopReason, true
	case *brt.ConverseStreamOutputMemberMetadata:
		s.usage, s.metadata = v.Value.Usage, true
	}
	return nil
}

func (s *bedrockStream) delta(idx int32, d brt.ContentBlockDelta, onDelta OnDelta) error {
	switch v := d.(type) {
	case *brt.ContentBlockDeltaMemberText:
		if v.Value == "" {
			return nil
		}
		if err := s.grow(len(v.Value)); err != nil {
			return err
		}
		s.text.WriteString(v.Value)
		return onDelta(v.Value)
	case *brt.ContentBlockDeltaMemberToolUse:
		i, ok := s.tools[idx]
		if !ok {
			return Malformed("bedrock: toolUse delta without its contentBlockStart")
		}
		in := aws.ToString(v.Value.Input)
		if err := s.grow(len(in)); err != nil {
			return err
		}
		s.args[i].WriteString(in)
	case *brt.ContentBlockDeltaMemberReasoningContent:
		i, ok := s.thinks[idx]
		if !ok {
			i = len(s.thinking)
			s.thinks[idx] = i
			s.thinking = append(s.thinking, Thinking{})
			s.redacted = append(s.redacted, nil)
		}
		switch r := v.Value.(type) {
		case *brt.ReasoningContentBlockDeltaMemberText:
			s.thinking[i].Text += r.Value
			return s.grow(len(r.Value))
		case *brt.ReasoningContentBlockDeltaMemberSignature:
			s.thinking[i].Signature += r.Value
			return s.grow(len(r.Value))
		case *brt.ReasoningContentBlockDeltaMemberRedactedContent:
			s.redacted[i] = append(s.redacted[i], r.Value...)
			return s.grow(len(r.Value) * 4 / 3)
		}
	}
	return nil
}

func (s *bedrockStream) result() Result {
	r := Result{Content: s.text.String(), FinishReason: bedrockFinish(s.stop)}
	for i, c := range s.calls {
		c.Function.Arguments = s.args[i].String()
		if strings.TrimSpace(c.Function.Arguments) == "" {
			c.Function.Arguments = "{}"
		}
		r.ToolCalls = append(r.ToolCalls, c)
	}
	for i, t := range s.thinking {
		if len(s.redacted[i]) > 0 {
			t = Thinking{Redacted: base64.StdEncoding.EncodeToString(s.redacted[i])}
		}
		r.Thinking = append(r.Thinking, t)
	}
	bedrockUsage(&r, s.usage)
	return r
}

// bedrockCallID is id, or "call_" and 24 random hex digits when the
// provider gave none.
func bedrockCallID(id string) string {
	if id != "" {
		return id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
