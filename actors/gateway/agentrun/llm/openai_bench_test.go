package llm

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// oaBenchStream is a 200-chunk stream with its usage chunk and [DONE].
func oaBenchStream() []byte {
	var b bytes.Buffer
	for i := range 200 {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word%d\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n", i)
	}
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n")
	b.WriteString("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":200}}\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkOpenAIStream reads a 200-delta stream (the hot chat path's
// parser, without the network).
func BenchmarkOpenAIStream(b *testing.B) {
	data := oaBenchStream()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := oaReadStream(context.Background(), bytes.NewReader(data), DefaultMaxAnswer, func(string) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
