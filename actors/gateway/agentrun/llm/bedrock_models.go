package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// bedrockEmptySHA256 is the SHA-256 of an empty payload, hex.
const bedrockEmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// bedrockSigner signs the control-plane GET; safe for concurrent use.
var bedrockSigner = v4.NewSigner()

// Models lists Bedrock's foundation models that answer text:
// ListFoundationModels (GET /foundation-models?byOutputModality=TEXT on
// the control-plane host bedrock.{region}.amazonaws.com, SigV4 service
// "bedrock"), or settings.models_endpoint, or api_base when one is set.
func (b *bedrock) Models(ctx context.Context) ([]Model, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.modelsURL+"/foundation-models?byOutputModality=TEXT", nil)
	if err != nil {
		return nil, fmt.Errorf("bedrock: models request: %w", err)
	}
	if err := bedrockSigner.SignHTTP(ctx, b.creds, req, bedrockEmptySHA256, "bedrock", b.region, time.Now().UTC()); err != nil {
		return nil, fmt.Errorf("bedrock: sign models request: %w", err)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, Unreachable(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		e := StatusError(resp)
		if e.Type == "" {
			e.Type = bedrockErrorType(resp.Header.Get("X-Amzn-ErrorType"))
		}
		return nil, e
	}
	var body struct {
		ModelSummaries []struct {
			ModelID      string `json:"modelId"`
			ModelName    string `json:"modelName"`
			ProviderName string `json:"providerName"`
		} `json:"modelSummaries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		var own *Error
		if errors.As(err, &own) {
			return nil, own
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, Malformed("bedrock: unreadable model list")
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	out := make([]Model, 0, len(body.ModelSummaries))
	for _, m := range body.ModelSummaries {
		name := strings.TrimSpace(m.ProviderName + " " + m.ModelName)
		out = append(out, Model{ID: m.ModelID, DisplayName: name})
	}
	return out, nil
}

// Verify lists the models: the cheapest call that needs a valid
// signature (the credential needs bedrock:ListFoundationModels).
func (b *bedrock) Verify(ctx context.Context) error {
	_, err := b.Models(ctx)
	return err
}

// bedrockErrorType is x-amzn-ErrorType's type: "ThrottlingException" of
// "ThrottlingException:http://internal.amazon.com/coral/…".
func bedrockErrorType(h string) string {
	if i := strings.IndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	if i := strings.LastIndexByte(h, '#'); i >= 0 {
		h = h[i+1:]
	}
	return h
}
