package llm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestGeminiSchema(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no parameters", ``, `null`},
		{"object without properties", `{"type":"object","properties":{},"additionalProperties":false}`, `null`},
		{"typeless root", `{"properties":{"a":{"type":"integer","format":"int32"}}}`, `{"properties":{"a":{"format":"int32","type":"INTEGER"}},"type":"OBJECT"}`},
		{
			"map-typed property",
			`{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}`,
			`{"properties":{"labels":{"type":"OBJECT"}},"type":"OBJECT"}`,
		},
		{
			"oneOf, numeric enum, formats",
			`{"type":"object","properties":{"v":{"oneOf":[{"type":"string","format":"date-time"},{"type":"number","format":"int64","enum":[1,2]}]},"n":{"type":"integer","exclusiveMinimum":0,"minimum":1}}}`,
			`{"properties":{"n":{"minimum":1,"type":"INTEGER"},"v":{"anyOf":[{"format":"date-time","type":"STRING"},{"type":"NUMBER"}]}},"type":"OBJECT"}`,
		},
		{
			"definitions ref and enum without type",
			`{"type":"object","properties":{"c":{"$ref":"#/definitions/color"}},"definitions":{"color":{"enum":["red","blue"]}}}`,
			`{"properties":{"c":{"enum":["red","blue"],"type":"STRING"}},"type":"OBJECT"}`,
		},
		{
			"unresolvable ref",
			`{"type":"object","properties":{"c":{"$ref":"https://example.com/s.json"}}}`,
			`{"properties":{"c":{"type":"OBJECT"}},"type":"OBJECT"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := gemSchema(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("gemSchema(%s) = %v", tt.in, err)
			}
			b, _ := json.Marshal(out)
			if string(b) != tt.want {
				t.Errorf("gemSchema(%s)\n = %s\nwant %s", tt.in, b, tt.want)
			}
		})
	}
	if _, err := gemSchema(json.RawMessage(`"string"`)); err == nil {
		t.Error("gemSchema of a non-object = nil error")
	}
}

// TestGeminiSchemaRefBomb: ten self-references per level would inline
// 10^8 nodes; the conversion stays within its node budget.
func TestGeminiSchemaRefBomb(t *testing.T) {
	var props []string
	for i := range 10 {
		props = append(props, fmt.Sprintf(`"p%d":{"$ref":"#/$defs/n"}`, i))
	}
	in := `{"type":"object","properties":{"root":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}}`
	out, err := gemSchema(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	if n := strings.Count(string(b), `"type"`); n > 2*gemMaxNodes {
		t.Errorf("converted schema has %d nodes, want at most about %d", n, gemMaxNodes)
	}
}
