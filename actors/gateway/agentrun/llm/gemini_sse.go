package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// gemSSE reads the server-sent events of streamGenerateContent?alt=sse
// (`data: {GenerateContentResponse}` then a blank line, lines ending in
// \r\n or \n), returning each event's data. One event holds at most max
// bytes: a larger one fails with TooLarge instead of growing the buffer.
type gemSSE struct {
	r         *bufio.Reader
	max       int
	maxAnswer int
	data      []byte
	line      []byte
}

func newGemSSE(r io.Reader, max, maxAnswer int) *gemSSE {
	return &gemSSE{r: bufio.NewReaderSize(r, 16<<10), max: max, maxAnswer: maxAnswer}
}

// next returns the next event's data (data lines joined by "\n"), valid
// until the next call; io.EOF after the last event. Lines that open with
// "{" outside any event are a bare JSON object (an error the server
// wrote after the stream began, possibly pretty-printed) and are returned
// whole, as one event.
func (s *gemSSE) next() ([]byte, error) {
	s.data = s.data[:0]
	have, bare := false, false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && have {
				return s.data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if have {
				return s.data, nil
			}
			continue
		}
		value := line
		if !have && line[0] == '{' {
			bare = true
		}
		if !bare {
			field, v, _ := bytes.Cut(line, []byte(":"))
			if string(field) != "data" { // comments, event:, id:, retry:
				continue
			}
			value = bytes.TrimPrefix(v, []byte(" "))
		}
		if have {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > s.max {
			return nil, TooLarge(s.maxAnswer)
		}
		s.data = append(s.data, value...)
		have = true
	}
}

// readLine returns one line without its line ending, bounded by max; an
// unterminated last line is returned with io.EOF only when empty.
func (s *gemSSE) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.line)+len(chunk) > s.max+2 {
			return nil, TooLarge(s.maxAnswer)
		}
		s.line = append(s.line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(s.line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(s.line) > 0:
			return bytes.TrimRight(s.line, "\r\n"), nil
		default:
			return nil, err
		}
	}
}
