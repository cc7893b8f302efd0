// azure_openai: Azure OpenAI's chat completions, following
// https://learn.microsoft.com/azure/ai-services/openai/reference: POST
// {api_base}/openai/deployments/{deployment}/chat/completions?api-version={settings.api_version}
// or, when settings.api_version is "v1", the v1 API's
// {api_base}/openai/v1/chat/completions with the deployment as the body's
// model; the key goes in the api-key header. The deployment is
// settings.deployments[model], or the model itself.
//
// The wire format is OpenAI's: the openai_compat client (openai.go) does
// the work, parameterised by URL and auth header; no SDK, for the same
// reasons. Its stream may begin with a chunk whose choices are empty
// (prompt_filter_results), which the stream reader skips.

package llm

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
)

func init() {
	Register(TypeInfo{Name: "azure_openai", NeedsKey: true, New: newAzure, Validate: validateAzure})
}

// azureUsageSince is the first dated api-version that accepts
// stream_options (older ones refuse it with a 400).
const azureUsageSince = "2024-08-01"

// azureSettings is what azure_openai reads from settings.
type azureSettings struct {
	APIVersion  string
	Deployments map[string]string
	MaxTokens   int
}

func parseAzureSettings(raw json.RawMessage) (azureSettings, error) {
	var s azureSettings
	f, err := oaFields(raw)
	if err != nil {
		return s, err
	}
	if s.APIVersion, err = oaString(f, "api_version"); err != nil {
		return s, err
	}
	if s.APIVersion == "" {
		return s, errors.New(`settings.api_version is required (a dated version such as "2024-10-21", or "v1")`)
	}
	if strings.ContainsAny(s.APIVersion, "&#?/ ") {
		return s, errors.New("settings.api_version is not a valid api-version")
	}
	if v, ok := f["deployments"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &s.Deployments) != nil {
			return s, errors.New("settings.deployments must be an object mapping model names to deployment names (strings)")
		}
		for m, d := range s.Deployments {
			if d == "" || strings.ContainsAny(d, "/?#") {
				return s, errors.New("settings.deployments[" + strings.ToValidUTF8(m, "") + "] must be a deployment name")
			}
		}
	}
	s.MaxTokens, err = oaInt(f, "max_tokens", 1, 1<<24)
	return s, err
}

func validateAzure(apiBase string, settings json.RawMessage) error {
	if err := oaCheckBase(apiBase); err != nil {
		return err
	}
	_, err := parseAzureSettings(settings)
	return err
}

func newAzure(cfg Config) (Client, error) {
	if err := oaCheckBase(cfg.APIBase); err != nil {
		return nil, err
	}
	st, err := parseAzureSettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(cfg.APIBase, "/") + "/openai"
	deployment := func(model string) string {
		if d := st.Deployments[model]; d != "" {
			return d
		}
		return model
	}
	c := &oaClient{
		http:       cfg.HTTP,
		authHeader: "api-key",
		authValue:  cfg.Key,
		maxTokens:  st.MaxTokens,
		maxAnswer:  cfg.MaxAnswer,
	}
	if st.APIVersion == "v1" {
		c.route = func(model string) (string, string) { return base + "/v1/chat/completions", deployment(model) }
		c.modelsURL = base + "/v1/models"
		c.streamUsage = true
		return c, nil
	}
	q := "?api-version=" + url.QueryEscape(st.APIVersion)
	c.route = func(model string) (string, string) {
		return base + "/deployments/" + url.PathEscape(deployment(model)) + "/chat/completions" + q, ""
	}
	c.modelsURL = base + "/models" + q
	c.streamUsage = st.APIVersion >= azureUsageSince
	return c, nil
}
