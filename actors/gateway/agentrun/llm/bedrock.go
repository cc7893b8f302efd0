// Bedrock: the bedrock provider type, Amazon Bedrock's Converse and
// ConverseStream APIs (POST /model/{modelId}/converse and
// /converse-stream, AWS event-stream framing), signed with SigV4, as the
// Amazon Bedrock API Reference (runtime: Converse, ConverseStream;
// control plane: ListFoundationModels) documents them.
//
// It uses the official SDK (aws-sdk-go-v2/service/bedrockruntime) for the
// runtime calls: SigV4, the request shapes and the event-stream decoder
// come with it; the client is built by hand (no env, files or IMDS), with
// SDK retries off and bodies bounded by our transport wrapper. The model
// list lives on the control-plane host, whose SDK module is not linked:
// that one GET is signed with the SDK's v4 signer (bedrock_models.go).

package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
)

func init() {
	Register(TypeInfo{
		Name:        "bedrock",
		DefaultBase: "", // the region decides: https://bedrock-runtime.{region}.amazonaws.com
		NeedsKey:    true,
		New:         newBedrock,
		Validate:    validateBedrock,
	})
}

// bedrockSettings is what the bedrock type reads from a provider's
// settings.
type bedrockSettings struct {
	// Region is the AWS region (required unless api_base is given).
	Region string `json:"region"`
	// MaxTokens is inferenceConfig.maxTokens when a request has none.
	MaxTokens int `json:"max_tokens"`
	// ModelsEndpoint is the control-plane base for the model list
	// (default https://bedrock.{region}.amazonaws.com, or api_base).
	ModelsEndpoint string `json:"models_endpoint"`
	// ThinkingBudgetTokens > 0 asks Anthropic models for extended
	// thinking (additionalModelRequestFields.thinking).
	ThinkingBudgetTokens int `json:"thinking_budget_tokens"`
}

// bedrockDefaultRegion signs calls to an api_base given without a region.
const bedrockDefaultRegion = "us-east-1"

var bedrockRegionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

func parseBedrockSettings(raw json.RawMessage) (bedrockSettings, error) {
	var s bedrockSettings
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("settings: %w", err)
	}
	return s, nil
}

func validateBedrock(apiBase string, raw json.RawMessage) error {
	s, err := parseBedrockSettings(raw)
	if err != nil {
		return err
	}
	switch {
	case s.Region == "" && apiBase == "":
		return errors.New("settings.region is required (or api_base)")
	case s.Region != "" && !bedrockRegionRE.MatchString(s.Region):
		return fmt.Errorf("settings.region %q is not an AWS region (like us-east-1)", s.Region)
	case s.MaxTokens < 0:
		return errors.New("settings.max_tokens must be positive")
	case s.ThinkingBudgetTokens < 0:
		return errors.New("settings.thinking_budget_tokens must be positive")
	}
	if apiBase != "" {
		if err := bedrockCheckURL(apiBase); err != nil {
			return fmt.Errorf("api_base: %w", err)
		}
	}
	if s.ModelsEndpoint != "" {
		if err := bedrockCheckURL(s.ModelsEndpoint); err != nil {
			return fmt.Errorf("settings.models_endpoint: %w", err)
		}
	}
	return nil
}

func bedrockCheckURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an http(s) URL")
	}
	return nil
}

// bedrockCreds splits api_key "ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]".
// Its error never holds the key.
func bedrockCreds(key string) (aws.Credentials, error) {
	parts := strings.SplitN(strings.TrimSpace(key), ":", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" || (len(parts) == 3 && parts[2] == "") {
		return aws.Credentials{}, errors.New("bedrock: api_key must be ACCESS_KEY_ID:SECRET_ACCESS_KEY or ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN")
	}
	c := aws.Credentials{AccessKeyID: parts[0], SecretAccessKey: parts[1], Source: "gatehouse"}
	if len(parts) == 3 {
		c.SessionToken = parts[2]
	}
	return c, nil
}

// bedrock is the bedrock type's Client: one SDK client per Config.
type bedrock struct {
	sdk       *bedrockruntime.Client
	http      *bedrockHTTP // cfg.HTTP with bounded bodies
	creds     aws.Credentials
	region    string
	modelsURL string // control-plane base for ListFoundationModels
	set       bedrockSettings
	maxAnswer int
}

func newBedrock(cfg Config) (Client, error) {
	s, err := parseBedrockSettings(cfg.Settings)
	if err != nil {
		return nil, fmt.Errorf("bedrock: %w", err)
	}
	if err := validateBedrock(cfg.APIBase, cfg.Settings); err != nil {
		return nil, fmt.Errorf("bedrock: %w", err)
	}
	creds, err := bedrockCreds(cfg.Key)
	if err != nil {
		return nil, err
	}
	region := s.Region
	if region == "" {
		region = bedrockDefaultRegion
	}
	b := &bedrock{
		http:      &bedrockHTTP{c: cfg.HTTP, maxAnswer: cfg.MaxAnswer},
		creds:     creds,
		region:    region,
		set:       s,
		maxAnswer: cfg.MaxAnswer,
	}
	switch {
	case s.ModelsEndpoint != "":
		b.modelsURL = strings.TrimRight(s.ModelsEndpoint, "/")
	case cfg.APIBase != "":
		b.modelsURL = strings.TrimRight(cfg.APIBase, "/")
	default:
		b.modelsURL = "https://bedrock." + region + ".amazonaws.com"
	}
	opts := bedrockruntime.Options{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken),
		HTTPClient:  b.http,
		Retryer:     aws.NopRetryer{},
	}
	if cfg.APIBase != "" {
		opts.BaseEndpoint = aws.String(strings.TrimRight(cfg.APIBase, "/"))
	}
	b.sdk = bedrockruntime.New(opts, func(o *bedrockruntime.Options) {
		// New reads AWS_BEARER_TOKEN_BEDROCK from the environment and
		// then prefers bearer auth; the gateway's credential is the key.
		o.BearerAuthTokenProvider = nil
		o.AuthSchemePreference = nil
		o.APIOptions = nil
	})
	return b, nil
}

// Complete runs one Converse (onDelta nil) or ConverseStream call.
func (b *bedrock) Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error) {
	in, err := b.input(req)
	if err != nil {
		return Result{}, err
	}
	if onDelta == nil {
		return b.converse(ctx, in)
	}
	return b.converseStream(ctx, in, onDelta)
}

func (b *bedrock) converse(ctx context.Context, in *bedrockInput) (Result, error) {
	out, err := b.sdk.Converse(ctx, in.converse())
	if err != nil {
		return Result{}, bedrockError(ctx, err)
	}
	res, err := bedrockResult(out)
	if err != nil {
		return Result{}, err
	}
	if AnswerSize(&res) > b.maxAnswer {
		return Result{}, TooLarge(b.maxAnswer)
	}
	return res, nil
}
