package gateway

import (
	"regexp"
	"testing"
)

// TestEmptyListsAreArrays: on a fresh gateway every list answers
// "data": [] rather than null, so clients can iterate without a check.
// Path parameters are filled with an agent's key; routes that
// then answer anything but 200 are not lists of it and are skipped.
func TestEmptyListsAreArrays(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("lists", "{}", "")
	param := regexp.MustCompile(`\{[^}]+\}`)
	checked := 0
	for _, rt := range e.srv.Routes() {
		if rt.Method != "GET" || rt.Public {
			continue
		}
		path := param.ReplaceAllString(rt.Path, "lists")
		r := e.do("GET", path, gwToken, "", as("alice")...)
		if r.status != 200 || r.body == nil {
			t.Logf("GET %s: %d", path, r.status)
			continue
		}
		data, ok := r.body["data"]
		if !ok {
			continue
		}
		checked++
		if data == nil {
			t.Errorf("GET %s: \"data\" is null, want []", path)
		}
	}
	if checked < 10 {
		t.Errorf("only %d list routes answered 200: the test checks too little", checked)
	}
}
