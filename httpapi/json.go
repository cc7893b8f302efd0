package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/listener"
)

// Limits of request fields (see doc.go).
const (
	maxNameRunes = 100
	maxRateLimit = 1_000_000_000
	timeLayout   = "2006-01-02T15:04:05Z"
)

var jsonNull = []byte("null")

// writeJSON writes v as the JSON body with the given status.
func writeJSON(rc *fasthttp.RequestCtx, status int, v any) {
	if listener.WriteJSON(rc, status, v) != nil { // only plain structs reach here: a broken invariant, answered as 500
		rc.SetStatusCode(fasthttp.StatusInternalServerError)
		rc.SetContentType("application/json")
		rc.SetBodyString(`{"error":"` + codeInternal + `","message":"internal error"}` + "\n")
	}
}

// decodeBody decodes the request body, which must be exactly one JSON
// object no larger than MaxBodyBytes, into dst, a struct of json.RawMessage
// fields. Field types are checked afterwards by the opt* helpers so that a
// wrongly typed field is a VALIDATION_ERROR naming it, not INVALID_JSON.
func (s *Server) decodeBody(rc *fasthttp.RequestCtx, dst any) error {
	body := rc.Request.Body()
	if len(body) > s.cfg.MaxBodyBytes {
		return errTooLarge
	}
	err := listener.DecodeObject(body, dst)
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, listener.ErrEmptyBody), errors.Is(err, listener.ErrNotObject), errors.Is(err, listener.ErrTrailing),
		errors.Is(err, listener.ErrNotUTF8):
		return invalidJSON(err.Error())
	case errors.As(err, &se):
		return invalidJSON(se.Error())
	}
	return invalidJSON("unexpected end of input")
}

func absent(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), jsonNull)
}

// optString decodes a string field; ok is false when it is absent or null.
func optString(raw json.RawMessage, field string) (v string, ok bool, err error) {
	if absent(raw) {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false, invalidField(field, "must be a string")
	}
	return v, true, nil
}

// reqString decodes a required, non-empty string field.
func reqString(raw json.RawMessage, field string) (string, error) {
	v, ok, err := optString(raw, field)
	switch {
	case err != nil:
		return "", err
	case !ok || v == "":
		return "", invalidField(field, "is required")
	}
	return v, nil
}

// optBool decodes a boolean field; ok is false when it is absent or null.
func optBool(raw json.RawMessage, field string) (v bool, ok bool, err error) {
	if absent(raw) {
		return false, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, false, invalidField(field, "must be a boolean")
	}
	return v, true, nil
}

// optRateLimit decodes a rateLimit: a JSON integer (no fraction, no
// exponent) in 1..maxRateLimit.
func optRateLimit(raw json.RawMessage, field string) (v int64, ok bool, err error) {
	if absent(raw) {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if perr != nil || n < 1 || n > maxRateLimit {
		return 0, false, invalidField(field, "must be an integer between 1 and %d", maxRateLimit)
	}
	return n, true, nil
}

// optTime decodes an ISO 8601 (RFC 3339) timestamp that must lie after
// now. set is false when the field is absent; null sets the zero time.
func optTime(raw json.RawMessage, field string, now time.Time) (v time.Time, set bool, err error) {
	if len(raw) == 0 {
		return time.Time{}, false, nil
	}
	if absent(raw) {
		return time.Time{}, true, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return time.Time{}, false, invalidField(field, "must be an ISO 8601 timestamp string or null")
	}
	t, perr := time.Parse(time.RFC3339Nano, str)
	if perr != nil {
		return time.Time{}, false, invalidField(field, "must be an ISO 8601 timestamp like 2026-11-22T10:00:00Z")
	}
	if !t.After(now) {
		return time.Time{}, false, invalidField(field, "must be in the future")
	}
	return t.UTC(), true, nil
}

// checkName enforces the key-name rule: 1-100 Unicode characters, not only
// whitespace, no control characters.
func checkName(name, field string) error {
	n := utf8.RuneCountInString(name)
	switch {
	case n < 1 || n > maxNameRunes:
		return invalidField(field, "must be 1-%d characters", maxNameRunes)
	case strings.TrimSpace(name) == "":
		return invalidField(field, "must not be only whitespace")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return invalidField(field, "must not contain control characters")
	}
	return nil
}

// isoTime is a time that marshals as 2026-11-22T10:00:00Z (UTC, whole
// seconds), or null when zero.
type isoTime time.Time

func (t isoTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return jsonNull, nil
	}
	b := make([]byte, 0, len(timeLayout)+2)
	b = append(b, '"')
	b = tt.UTC().AppendFormat(b, timeLayout)
	return append(b, '"'), nil
}
