package llm

import (
	"encoding/json"
	"errors"
	"strings"
)

// Gemini's functionDeclarations[].parameters is not JSON Schema but the
// API's Schema object (an OpenAPI 3.0 subset,
// https://ai.google.dev/api/caching#Schema); the API refuses any field it
// does not know ("Invalid JSON payload received. Unknown name ...").
// gemSchema rewrites a tool's JSON Schema into it:
//   - kept: type (upper-cased: STRING, NUMBER, INTEGER, BOOLEAN, ARRAY,
//     OBJECT), format (only those the API accepts for the type),
//     title, description, nullable, enum (string values only), properties,
//     required (only names among properties), items, anyOf, minItems,
//     maxItems, minProperties, maxProperties, minLength, maxLength,
//     pattern, minimum, maximum, example, default, propertyOrdering;
//   - rewritten: a type list ["string", "null"] → type + nullable; const →
//     a one-value enum; oneOf → anyOf; a local $ref (#/$defs/…,
//     #/definitions/…) is inlined (to a bounded depth);
//   - dropped: $schema, $id, $defs, definitions, $comment,
//     additionalProperties, patternProperties, unevaluatedProperties,
//     allOf, not, if/then/else, exclusiveMinimum/Maximum, multipleOf,
//     uniqueItems, examples, readOnly, writeOnly, deprecated and every
//     other keyword;
//   - an object without properties at the top is sent without
//     parameters, and an empty properties is left out below it (older
//     API versions refuse an OBJECT with empty properties);
//   - $ref inlining stops after gemMaxRefDepth nested references or
//     gemMaxNodes converted nodes (the rest reads as a bare OBJECT), so
//     a recursive or exploding schema stays small.

// gemSchemaKeep lists the Schema fields copied as they are.
var gemSchemaKeep = map[string]bool{
	"title": true, "description": true, "nullable": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true, "minLength": true, "maxLength": true,
	"pattern": true, "minimum": true, "maximum": true, "example": true, "default": true,
	"propertyOrdering": true,
}

// gemFormats lists the formats the API accepts per type.
var gemFormats = map[string]map[string]bool{
	"STRING":  {"enum": true, "date-time": true},
	"NUMBER":  {"float": true, "double": true},
	"INTEGER": {"int32": true, "int64": true},
}

// gemMaxRefDepth and gemMaxNodes bound $ref inlining.
const (
	gemMaxRefDepth = 8
	gemMaxNodes    = 5000
)

// gemConv is one schema conversion: its root (for $ref) and how many
// nodes it may still produce.
type gemConv struct {
	root  map[string]any
	nodes int
}

// gemSchema converts a tool's JSON Schema; nil (no parameters) for an
// empty schema or an object without properties.
func gemSchema(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, errors.New("parameters is not a JSON object")
	}
	c := &gemConv{root: root, nodes: gemMaxNodes}
	out := c.node(root, 0)
	if props, _ := out["properties"].(map[string]any); len(props) == 0 {
		return nil, nil
	}
	out["type"] = "OBJECT"
	return out, nil
}

func (c *gemConv) node(n map[string]any, depth int) map[string]any {
	c.nodes--
	if ref, ok := n["$ref"].(string); ok {
		if def := gemResolveRef(c.root, ref); def != nil && depth < gemMaxRefDepth && c.nodes > 0 {
			return c.node(def, depth+1)
		}
		return map[string]any{"type": "OBJECT"}
	}
	out := map[string]any{}
	for k, v := range n {
		if gemSchemaKeep[k] {
			out[k] = v
		}
	}
	typ := gemType(n, out)
	if typ != "" {
		out["type"] = typ
	}
	if enum := gemEnum(n); enum != nil {
		out["enum"] = enum
		if typ == "" {
			typ = "STRING"
			out["type"] = typ
		}
	}
	if f, ok := n["format"].(string); ok && gemFormats[typ][f] {
		out["format"] = f
	}
	if props, ok := n["properties"].(map[string]any); ok {
		conv := make(map[string]any, len(props))
		for name, p := range props {
			if pm, ok := p.(map[string]any); ok {
				conv[name] = c.node(pm, depth)
			}
		}
		if len(conv) > 0 {
			out["properties"] = conv
		}
		if req, ok := n["required"].([]any); ok {
			var keep []any
			for _, r := range req {
				if s, ok := r.(string); ok && conv[s] != nil {
					keep = append(keep, s)
				}
			}
			if len(keep) > 0 {
				out["required"] = keep
			}
		}
	}
	if items, ok := n["items"].(map[string]any); ok {
		out["items"] = c.node(items, depth)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := n[key].([]any); ok {
			var conv []any
			for _, a := range alts {
				if am, ok := a.(map[string]any); ok {
					conv = append(conv, c.node(am, depth))
				}
			}
			if len(conv) > 0 {
				out["anyOf"] = conv
			}
		}
	}
	return out
}

// gemType is n's type in the API's enum, setting nullable for a type list
// holding "null"; inferred from properties or items when absent.
func gemType(n, out map[string]any) string {
	var t string
	switch v := n["type"].(type) {
	case string:
		t = v
	case []any:
		for _, e := range v {
			s, _ := e.(string)
			if s == "null" {
				out["nullable"] = true
			} else if t == "" {
				t = s
			}
		}
	}
	switch {
	case t == "" && n["properties"] != nil:
		t = "object"
	case t == "" && n["items"] != nil:
		t = "array"
	}
	switch t = strings.ToUpper(t); t {
	case "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT":
		return t
	}
	return ""
}

// gemEnum is n's enum (or const) when every value is a string.
func gemEnum(n map[string]any) []any {
	vals, ok := n["enum"].([]any)
	if c, has := n["const"]; has && !ok {
		vals, ok = []any{c}, true
	}
	if !ok || len(vals) == 0 {
		return nil
	}
	for _, v := range vals {
		if _, s := v.(string); !s {
			return nil
		}
	}
	return vals
}

// gemResolveRef finds a local reference (#/$defs/x, #/definitions/x).
func gemResolveRef(root map[string]any, ref string) map[string]any {
	for _, prefix := range []string{"#/$defs/", "#/definitions/"} {
		if name, ok := strings.CutPrefix(ref, prefix); ok {
			defs, _ := root[strings.TrimSuffix(prefix[2:], "/")].(map[string]any)
			def, _ := defs[name].(map[string]any)
			return def
		}
	}
	return nil
}
