package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The request checks of the Gemini stub (see Gemini's doc comment).

type gemReq struct {
	Contents          []gemContent                 `json:"contents"`
	SystemInstruction *gemContent                  `json:"systemInstruction"`
	Tools             []map[string]json.RawMessage `json:"tools"`
	ToolConfig        json.RawMessage              `json:"toolConfig"`
	SafetySettings    json.RawMessage              `json:"safetySettings"`
	GenerationConfig  map[string]json.RawMessage   `json:"generationConfig"`
	CachedContent     string                       `json:"cachedContent"`
}

type gemContent struct {
	Role  string                       `json:"role"`
	Parts []map[string]json.RawMessage `json:"parts"`
}

// gemData are the part fields of which a part holds exactly one.
var gemData = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"}

// gemPartMeta are the other fields a part may have.
var gemPartMeta = map[string]bool{"thought": true, "thoughtSignature": true, "videoMetadata": true, "partMetadata": true}

// check decodes and checks a generateContent body; problem is "" when
// the API would accept it.
func (g *Gemini) check(body []byte) (*gemReq, string) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req gemReq
	if err := dec.Decode(&req); err != nil {
		return nil, "Invalid JSON payload received: " + err.Error()
	}
	if len(req.Contents) == 0 {
		return nil, "contents is not specified"
	}
	if req.SystemInstruction != nil {
		if p := gemCheckParts("systemInstruction", req.SystemInstruction.Parts); p != "" {
			return nil, p
		}
	}
	for i := range req.Contents {
		if p := g.checkContent(req.Contents, i); p != "" {
			return nil, p
		}
	}
	if p := g.checkSignatures(req.Contents); p != "" {
		return nil, p
	}
	for i, t := range req.Tools {
		if p := gemCheckTool(i, t); p != "" {
			return nil, p
		}
	}
	if p := gemCheckGenConfig(req.GenerationConfig); p != "" {
		return nil, p
	}
	return &req, ""
}

func (g *Gemini) checkContent(all []gemContent, i int) string {
	c := all[i]
	where := fmt.Sprintf("contents[%d]", i)
	switch {
	case c.Role == "system":
		return where + ": role \"system\" is not a content role (use systemInstruction)"
	case c.Role != "user" && c.Role != "model":
		return fmt.Sprintf("%s: role %q, want user or model", where, c.Role)
	case i == 0 && c.Role != "user":
		return "contents[0]: a conversation starts with a user turn"
	case i > 0 && all[i-1].Role == c.Role:
		return fmt.Sprintf("%s: two %s turns in a row (roles must alternate)", where, c.Role)
	}
	if p := gemCheckParts(where, c.Parts); p != "" {
		return p
	}
	var calls, resps []string
	for j, part := range c.Parts {
		if fc, ok := part["functionCall"]; ok {
			name, p := gemCheckCall(fmt.Sprintf("%s.parts[%d].functionCall", where, j), fc, "args")
			if p != "" {
				return p
			}
			calls = append(calls, name)
		}
		if fr, ok := part["functionResponse"]; ok {
			name, p := gemCheckCall(fmt.Sprintf("%s.parts[%d].functionResponse", where, j), fr, "response")
			if p != "" {
				return p
			}
			resps = append(resps, name)
		}
	}
	if len(calls) > 0 && c.Role != "model" {
		return where + ": functionCall parts belong in a model turn"
	}
	if len(resps) > 0 {
		if c.Role != "user" {
			return where + ": functionResponse parts belong in a user turn"
		}
		prev := gemCallNames(all[i-1])
		if len(prev) != len(resps) {
			return fmt.Sprintf("%s: %d function response parts for %d function call parts of the previous turn (must be equal)", where, len(resps), len(prev))
		}
		for _, r := range resps {
			if !gemHas(prev, r) {
				return fmt.Sprintf("%s: functionResponse %q names no functionCall of the previous turn %v", where, r, prev)
			}
		}
	}
	if c.Role == "model" && len(calls) > 0 && i+1 < len(all) && len(gemRespNames(all[i+1])) == 0 {
		return fmt.Sprintf("contents[%d]: the turn after a function call must hold its function responses", i+1)
	}
	return ""
}

// checkSignatures applies Gemini 3's rule: in the current turn (after
// the last user content holding more than function responses), the
// first functionCall of each model content carries a signature.
func (g *Gemini) checkSignatures(all []gemContent) string {
	start := 0
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Role == "user" && len(gemRespNames(all[i])) < len(all[i].Parts) {
			start = i
			break
		}
	}
	for i := start; i < len(all); i++ {
		for j, part := range all[i].Parts {
			fc, ok := part["functionCall"]
			if !ok {
				continue
			}
			var sig string
			_ = json.Unmarshal(part["thoughtSignature"], &sig)
			var call struct{ Name string }
			_ = json.Unmarshal(fc, &call)
			g.mu.Lock()
			issuedFor, issued := g.sigs[sig]
			g.mu.Unlock()
			switch {
			case sig == GeminiDummySignature:
			case sig == "":
				return fmt.Sprintf("Function call %q in the %d. content block is missing a thought_signature", call.Name, i)
			case !issued || issuedFor != call.Name:
				return fmt.Sprintf("contents[%d].parts[%d]: thoughtSignature %q was not issued for %q", i, j, sig, call.Name)
			}
			break // only a step's first call is signed
		}
	}
	return ""
}

func gemCheckParts(where string, parts []map[string]json.RawMessage) string {
	if len(parts) == 0 {
		return where + ": must have at least one part"
	}
	for j, part := range parts {
		n := 0
		for k := range part {
			switch {
			case gemHas(gemData, k):
				n++
			case !gemPartMeta[k]:
				return fmt.Sprintf("%s.parts[%d]: Unknown name %q", where, j, k)
			}
		}
		if n != 1 {
			return fmt.Sprintf("%s.parts[%d]: a part holds exactly one of %v, this one %d", where, j, gemData, n)
		}
		if t, ok := part["text"]; ok {
			var s string
			if json.Unmarshal(t, &s) != nil || s == "" {
				return fmt.Sprintf("%s.parts[%d]: empty text parameter", where, j)
			}
		}
	}
	return ""
}

// gemCheckCall checks a functionCall (obj "args") or functionResponse
// (obj "response"): a name and an object.
func gemCheckCall(where string, raw json.RawMessage, obj string) (string, string) {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return "", where + ": not an object"
	}
	var name string
	if json.Unmarshal(v["name"], &name) != nil || name == "" {
		return "", where + ": name is required"
	}
	if o, ok := v[obj]; ok || obj == "response" {
		var m map[string]any
		if json.Unmarshal(o, &m) != nil || m == nil {
			return "", fmt.Sprintf("%s.%s: must be a JSON object", where, obj)
		}
	}
	return name, ""
}

func gemCallNames(c gemContent) []string { return gemNames(c, "functionCall") }
func gemRespNames(c gemContent) []string { return gemNames(c, "functionResponse") }

func gemNames(c gemContent, field string) []string {
	var out []string
	for _, p := range c.Parts {
		if raw, ok := p[field]; ok {
			var v struct{ Name string }
			_ = json.Unmarshal(raw, &v)
			out = append(out, v.Name)
		}
	}
	return out
}

func gemHas(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func gemCheckTool(i int, t map[string]json.RawMessage) string {
	raw, ok := t["functionDeclarations"]
	if !ok {
		return fmt.Sprintf("tools[%d]: no functionDeclarations", i)
	}
	var decls []map[string]json.RawMessage
	if json.Unmarshal(raw, &decls) != nil || len(decls) == 0 {
		return fmt.Sprintf("tools[%d].functionDeclarations: must be a non-empty list", i)
	}
	for j, d := range decls {
		where := fmt.Sprintf("tools[%d].functionDeclarations[%d]", i, j)
		for k := range d {
			switch k {
			case "name", "description", "parameters", "parametersJsonSchema", "response", "responseJsonSchema", "behavior":
			default:
				return fmt.Sprintf("%s: Unknown name %q", where, k)
			}
		}
		var name string
		if json.Unmarshal(d["name"], &name) != nil || !gemFuncName.MatchString(name) {
			return fmt.Sprintf("%s.name: %q is not a valid function name", where, name)
		}
		if p, ok := d["parameters"]; ok {
			var s map[string]any
			if json.Unmarshal(p, &s) != nil {
				return where + ".parameters: must be a Schema object"
			}
			if s["type"] != "OBJECT" {
				return where + ".parameters: schema should be of type OBJECT"
			}
			if p := gemCheckSchema(where+".parameters", s); p != "" {
				return p
			}
		}
	}
	return ""
}

// gemSchemaFields are the fields of the API's Schema object.
var gemSchemaFields = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"maxItems": true, "minItems": true, "properties": true, "required": true, "minProperties": true,
	"maxProperties": true, "minLength": true, "maxLength": true, "pattern": true, "example": true,
	"anyOf": true, "propertyOrdering": true, "default": true, "items": true, "minimum": true, "maximum": true,
}

func gemCheckSchema(where string, s map[string]any) string {
	for k := range s {
		if !gemSchemaFields[k] {
			return fmt.Sprintf("%s: Invalid JSON payload received. Unknown name %q", where, k)
		}
	}
	typ, _ := s["type"].(string)
	if _, has := s["type"]; has {
		switch typ {
		case "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT":
		default:
			return fmt.Sprintf("%s.type: invalid value %v", where, s["type"])
		}
	}
	props, hasProps := s["properties"].(map[string]any)
	if hasProps && len(props) == 0 {
		return where + ".properties: should be non-empty for OBJECT type"
	}
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s.properties[%s]: must be a Schema", where, name)
		}
		if pr := gemCheckSchema(where+".properties."+name, pm); pr != "" {
			return pr
		}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if n, _ := r.(string); props[n] == nil {
				return fmt.Sprintf("%s.required: property %v is not defined", where, r)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		if p := gemCheckSchema(where+".items", items); p != "" {
			return p
		}
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for k, a := range alts {
			am, _ := a.(map[string]any)
			if p := gemCheckSchema(fmt.Sprintf("%s.anyOf[%d]", where, k), am); p != "" {
				return p
			}
		}
	}
	return ""
}

func gemCheckGenConfig(gc map[string]json.RawMessage) string {
	for k, v := range gc {
		switch k {
		case "maxOutputTokens":
			var n int
			if json.Unmarshal(v, &n) != nil || n < 1 {
				return "generationConfig.maxOutputTokens: must be a positive integer"
			}
		case "thinkingConfig":
			var tc map[string]json.RawMessage
			if json.Unmarshal(v, &tc) != nil {
				return "generationConfig.thinkingConfig: must be an object"
			}
			for tk, tv := range tc {
				switch tk {
				case "thinkingBudget":
					var n int
					if json.Unmarshal(tv, &n) != nil || n < -1 {
						return "generationConfig.thinkingConfig.thinkingBudget: must be an integer >= -1"
					}
				case "includeThoughts":
					var b bool
					if json.Unmarshal(tv, &b) != nil {
						return "generationConfig.thinkingConfig.includeThoughts: must be a boolean"
					}
				case "thinkingLevel":
				default:
					return fmt.Sprintf("generationConfig.thinkingConfig: Unknown name %q", tk)
				}
			}
		case "temperature", "topP", "topK", "candidateCount", "stopSequences", "presencePenalty",
			"frequencyPenalty", "seed", "responseMimeType", "responseSchema", "responseJsonSchema", "responseLogprobs",
			"logprobs", "responseModalities", "mediaResolution", "speechConfig":
		default:
			return fmt.Sprintf("generationConfig: Unknown name %q", k)
		}
	}
	return ""
}

// lastUser is the text of the last user content (for the default reply).
func (r *gemReq) lastUser() string {
	for i := len(r.Contents) - 1; i >= 0; i-- {
		c := r.Contents[i]
		if c.Role != "user" {
			continue
		}
		var texts []string
		for _, p := range c.Parts {
			var s string
			if json.Unmarshal(p["text"], &s) == nil && s != "" {
				texts = append(texts, s)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
	}
	return ""
}

func (r *gemReq) includeThoughts() bool {
	var tc struct {
		IncludeThoughts bool `json:"includeThoughts"`
	}
	_ = json.Unmarshal(r.GenerationConfig["thinkingConfig"], &tc)
	return tc.IncludeThoughts
}
