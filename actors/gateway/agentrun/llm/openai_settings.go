// Settings and api_base checks shared by openai_compat, azure_openai and
// ollama, and the tool call ids they make up.

package llm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
)

// oaCheckBase refuses an api_base that is not a plain http(s) URL, as
// the gateway did before provider types had their own checks.
func oaCheckBase(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("api_base must be an http:// or https:// URL")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return errors.New("api_base must not carry credentials, a query or a fragment (the credential goes in api_key)")
	}
	return nil
}

// oaFields splits a settings object into its fields; empty or null
// settings have none.
func oaFields(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var f map[string]json.RawMessage
	if len(raw) == 0 {
		return f, nil
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, errors.New("settings must be a JSON object")
	}
	return f, nil
}

// oaInt reads the integer field name of f in [lo, hi]; 0 when absent or
// null.
func oaInt(f map[string]json.RawMessage, name string, lo, hi int) (int, error) {
	v, ok := f[name]
	if !ok || string(v) == "null" {
		return 0, nil
	}
	var n int
	if json.Unmarshal(v, &n) != nil || n < lo || n > hi {
		return 0, fmt.Errorf("settings.%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

// oaString reads the string field name of f; "" when absent or null.
func oaString(f map[string]json.RawMessage, name string) (string, error) {
	v, ok := f[name]
	if !ok || string(v) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", fmt.Errorf("settings.%s must be a string", name)
	}
	return s, nil
}

// oaCallID makes up a tool call id for a provider that gives none:
// "call_" and 24 random hex digits.
func oaCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
