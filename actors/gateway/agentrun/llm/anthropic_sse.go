// The anthropic_native stream's framing: server-sent events as
// https://html.spec.whatwg.org/multipage/server-sent-events.html and
// https://docs.anthropic.com/en/api/messages-streaming show them, each an
// `event: <name>` line and `data: <json>` lines ended by a blank line;
// each event and the whole stream bounded.
package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// anthStreamEvents is how many events' worth of bytes (each at most an
// event's bound) a whole stream may hold: room for many small deltas,
// each with its event's framing.
const anthStreamEvents = 64

// anthSSE reads the named events of a stream. One event (its lines, line
// endings included) holds at most max bytes and the whole stream at most
// left: past either, reading fails with TooLarge instead of buffering.
type anthSSE struct {
	r          *bufio.Reader
	max        int
	left       int64
	maxAnswer  int
	name, data []byte
	line       []byte // a line longer than the reader's buffer
}

// newAnthSSE reads r for an answer of at most maxAnswer bytes: an event
// may hold BodyLimit(maxAnswer) bytes (one delta may be the whole
// answer), the stream anthStreamEvents times that.
func newAnthSSE(r io.Reader, maxAnswer int) *anthSSE {
	lim := min(BodyLimit(maxAnswer), 1<<30)
	return &anthSSE{r: bufio.NewReaderSize(r, 16<<10), max: int(lim), left: anthStreamEvents * lim, maxAnswer: maxAnswer}
}

// next returns the next event's name and data (its data lines joined by
// "\n"), valid until the next call. Comment lines and fields other than
// event and data are skipped; blank lines outside an event too. io.EOF
// once the stream ends: a last event without its blank line is dropped,
// as the SSE standard says. Any other error is the body's, or TooLarge.
func (s *anthSSE) next() (name, data []byte, err error) {
	s.name, s.data = s.name[:0], s.data[:0]
	size := 0 // bytes of this event so far
	have := false
	for {
		line, n, err := s.readLine(size)
		if err != nil {
			return nil, nil, err
		}
		size += n
		if len(line) == 0 {
			if have {
				return s.name, s.data, nil
			}
			size = 0
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			s.name = append(s.name[:0], value...)
			have = true
		case "data":
			if have && len(s.data) > 0 {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			have = true
		}
	}
}

// readLine returns the next line without its line ending ("\n" or
// "\r\n"), valid until the next call, and the bytes it took; used is
// what the event already holds. An unterminated last line is returned,
// then io.EOF.
func (s *anthSSE) readLine(used int) (line []byte, n int, err error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		n += len(chunk)
		s.left -= int64(len(chunk))
		if used+n > s.max || s.left < 0 {
			return nil, n, TooLarge(s.maxAnswer)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			s.line = append(s.line, chunk...)
			continue
		case err != nil && (n == 0 || !errors.Is(err, io.EOF)):
			return nil, n, err
		}
		if len(s.line) > 0 {
			chunk = append(s.line, chunk...)
			s.line = chunk
		}
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		return bytes.TrimSuffix(chunk, []byte("\r")), n, nil
	}
}
