package main

// Strict decoding of the config file with errors a person can act on: the
// full dotted path of an unknown key or a wrongly typed value, and the
// line and column of every problem.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// fileError is a problem at a line and column (1-based, in characters) of
// a JSON document.
type fileError struct {
	line, col int
	msg       string
}

func (e *fileError) Error() string { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }

// errorAt places msg at the byte offset off of b.
func errorAt(b []byte, off int64, msg string) *fileError {
	before := b[:min(max(off, 0), int64(len(b)))]
	nl := bytes.LastIndexByte(before, '\n')
	return &fileError{bytes.Count(before, []byte("\n")) + 1, utf8.RuneCount(before[nl+1:]) + 1, msg}
}

// decodeStrict decodes the JSON document b into v (a pointer), refusing
// unknown keys and trailing data. encoding/json alone decides; when it
// refuses, explain finds the reason again, with its place and key path.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		err = errors.New("data after the top-level value")
	}
	if err != nil {
		return explain(b, reflect.TypeOf(v).Elem(), err)
	}
	return nil
}

// explain locates the decoding error decErr in b: a syntax error by its
// offset (the scanner behind json.Unmarshal reports exact ones, the token
// reader does not), an unknown key or a wrong type by walking b along t.
func explain(b []byte, t reflect.Type, decErr error) error {
	if se, ok := errors.AsType[*json.SyntaxError](json.Unmarshal(b, new(json.RawMessage))); ok {
		return errorAt(b, se.Offset-1, se.Error()) // Offset is just past the bad byte
	}
	w := walker{b: b, dec: json.NewDecoder(bytes.NewReader(b))}
	if err := w.value(t, ""); err != nil {
		return err
	}
	return decErr
}

// walker reads a valid JSON document token by token along the Go type it
// decodes into, to name the first unknown key or wrong type by its full
// path ("services.openai.timeout", "list[2].name") and place.
type walker struct {
	b   []byte
	dec *json.Decoder
}

// next returns the next token and the offset where it starts.
func (w *walker) next() (json.Token, int64, error) {
	off := w.dec.InputOffset() // the end of the previous token
	for off < int64(len(w.b)) && strings.IndexByte(" \t\r\n:,", w.b[off]) >= 0 {
		off++
	}
	tok, err := w.dec.Token()
	return tok, off, err
}

// value walks the value at path, which decodes into t.
func (w *walker) value(t reflect.Type, path string) error {
	tok, off, err := w.next()
	if err != nil {
		return err
	}
	raw := w.b[off:w.dec.InputOffset()] // a scalar, or '{' or '[' alone
	// A type with its own UnmarshalJSON (duration) takes a scalar.
	own := reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())
	k := t.Kind()
	switch {
	case tok == json.Delim('{') && !own && (k == reflect.Struct || k == reflect.Map):
		return w.object(t, path)
	case tok == json.Delim('[') && !own && (k == reflect.Slice || k == reflect.Array):
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := w.dec.Token()
		return err
	case raw[0] != '{' && raw[0] != '[' && json.Unmarshal(raw, reflect.New(t).Interface()) == nil:
		return nil // encoding/json's own verdict: number ranges, durations, null
	}
	got := map[byte]string{'"': "a string", '{': "an object", '[': "an array"}[raw[0]] // strings may be secrets
	if got == "" {
		got = string(raw) // a number, true or false
	}
	msg := fmt.Sprintf("want %s, got %s", typeName(t), got)
	if path != "" {
		msg = path + ": " + msg
	}
	return errorAt(w.b, off, msg)
}

// object walks the members of an object after its '{'.
func (w *walker) object(t reflect.Type, path string) error {
	for w.dec.More() {
		tok, off, err := w.next()
		if err != nil {
			return err
		}
		key := tok.(string)
		kt, ok := keyType(t, key)
		if !ok {
			return errorAt(w.b, off, fmt.Sprintf("unknown key %q; valid keys here: %s", join(path, key), validKeys(t)))
		}
		if err := w.value(kt, join(path, key)); err != nil {
			return err
		}
	}
	_, err := w.dec.Token()
	return err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonKey is the key encoding/json decodes into f, "" for none.
func jsonKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case !f.IsExported() || name == "-":
		return ""
	case name == "":
		return f.Name
	}
	return name
}

// keyType is the type key decodes into in t, a map or a struct; struct
// keys match ignoring case, as encoding/json matches them.
func keyType(t reflect.Type, key string) (reflect.Type, bool) {
	if t.Kind() == reflect.Map {
		return t.Elem(), true
	}
	for f := range t.Fields() {
		if k := jsonKey(f); k != "" && strings.EqualFold(k, key) {
			return f.Type, true
		}
	}
	return nil, false
}

// validKeys lists the keys of struct type t.
func validKeys(t reflect.Type) string {
	var ks []string
	for f := range t.Fields() {
		if k := jsonKey(f); k != "" {
			ks = append(ks, k)
		}
	}
	return strings.Join(ks, ", ")
}

func typeName(t reflect.Type) string {
	switch k := t.Kind(); {
	case t == reflect.TypeFor[duration]():
		return `a duration string such as "24h"`
	case k == reflect.String:
		return "a string"
	case k == reflect.Bool:
		return "true or false"
	case k >= reflect.Int && k <= reflect.Int64:
		return "an integer"
	case k >= reflect.Uint && k <= reflect.Uint64:
		return "an integer >= 0"
	case k == reflect.Float32 || k == reflect.Float64:
		return "a number"
	case k == reflect.Slice || k == reflect.Array:
		return "an array"
	}
	return "an object"
}
