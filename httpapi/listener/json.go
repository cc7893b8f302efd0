package listener

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// Errors of DecodeObject besides those of encoding/json.
var (
	ErrEmptyBody = errors.New("empty body")
	ErrNotObject = errors.New("body must be a JSON object")
	ErrTrailing  = errors.New("trailing data after the object")
	ErrNotUTF8   = errors.New("body is not valid UTF-8")
)

// WriteJSON writes v as the JSON body with the given status, ending in a
// newline (as every JSON answer of both listeners does, so that a shell's
// prompt does not run on after curl's output). It writes nothing and
// returns the error if v does not marshal (a broken invariant: only plain
// structs reach it).
func WriteJSON(rc *fasthttp.RequestCtx, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	rc.SetStatusCode(status)
	rc.SetContentType("application/json")
	rc.SetBody(append(b, '\n'))
	return nil
}

// DecodeObject decodes body, which must be exactly one JSON object
// (surrounding white space allowed), into dst. Errors: ErrEmptyBody,
// ErrNotObject, ErrTrailing, ErrNotUTF8 (encoding/json would silently turn
// invalid bytes into U+FFFD and store them), or encoding/json's (*json.SyntaxError,
// *json.UnmarshalTypeError, io.ErrUnexpectedEOF, or the error of a
// field's UnmarshalJSON). The caller bounds the body's size.
func DecodeObject(body []byte, dst any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ErrEmptyBody
	}
	if body[0] != '{' {
		return ErrNotObject
	}
	if !utf8.Valid(body) {
		return ErrNotUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailing
	}
	return nil
}
