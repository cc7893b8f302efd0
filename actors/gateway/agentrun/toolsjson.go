package agentrun

import (
	"bytes"
	"sync"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/agentrun/llm"
)

// toolsCacheBytes bounds what a toolsCache holds (the encoded arrays and
// the copied schemas, about twice a toolset's size); past it the cache
// starts again empty (each agent and user pair then costs one encoding).
const toolsCacheBytes = 16 << 20

// toolsCache keeps the tools array each agent's runs for each user send
// an OpenAI-shaped provider, encoded (llm.Request.ToolsJSON): the same
// schemas call after call, whose encoding was 12 % of the chat path's
// CPU (issue 35). A run's tools are listed afresh from the registry and
// the toolbox (toolsOf); an entry serves a run only when those tools
// are, name, description and schema byte for byte, the ones it was
// encoded from, so a tool added, removed or changed is encoded again at
// the next run. It is safe for concurrent use; its zero value is empty.
type toolsCache struct {
	mu   sync.Mutex
	m    map[toolsKey]*toolsEntry
	size int // the entries' bytes (toolsEntry.size)
}

type toolsKey struct {
	agent uuid.UUID
	user  string
}

// toolsEntry is immutable once stored.
type toolsEntry struct {
	specs []llm.ToolSpec // what enc encodes, schemas copied
	enc   []byte
	size  int // enc's and the specs' bytes
}

// encoded is llm.EncodeTools(specs), from the cache when agent's last
// run for user had the same tools; nil when there are none or they do
// not encode (the client then encodes them, and reports the error).
func (c *toolsCache) encoded(agent uuid.UUID, user string, specs []llm.ToolSpec) []byte {
	if len(specs) == 0 {
		return nil
	}
	k := toolsKey{agent, user}
	c.mu.Lock()
	e := c.m[k]
	c.mu.Unlock()
	if e != nil && sameSpecs(e.specs, specs) {
		return e.enc
	}
	enc, err := llm.EncodeTools(specs)
	if err != nil {
		return nil
	}
	e = &toolsEntry{specs: make([]llm.ToolSpec, len(specs)), enc: enc, size: 2 * len(enc)}
	for i, s := range specs {
		s.Function.Parameters = bytes.Clone(s.Function.Parameters)
		e.specs[i] = s
	}
	c.mu.Lock()
	if old := c.m[k]; old != nil {
		c.size -= old.size
	}
	if c.m == nil || c.size+e.size > toolsCacheBytes {
		c.m, c.size = make(map[toolsKey]*toolsEntry), 0
	}
	c.m[k], c.size = e, c.size+e.size
	c.mu.Unlock()
	return enc
}

// sameSpecs reports whether a and b would encode the same.
func sameSpecs(a, b []llm.ToolSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Type != y.Type || x.Function.Name != y.Function.Name || x.Function.Description != y.Function.Description ||
			!bytes.Equal(x.Function.Parameters, y.Function.Parameters) {
			return false
		}
	}
	return true
}
