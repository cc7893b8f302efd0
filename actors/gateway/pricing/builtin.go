package pricing

import "maps"

// BuiltinAsOf is when the built-in table's prices were taken: the
// providers' public list prices (docs/pricing.md names the sources), as
// known then. Prices change: override them in the config
// (pricing.models) or per provider (settings.prices).
const BuiltinAsOf = "2025-11"

// builtin is the built-in table: standard (not batch, not priority)
// list prices of each provider's API. Models that charge more for a long
// prompt have an Above tier: Claude Sonnet 4 and 4.5 (1M context) and
// Gemini 2.5 Pro above 200K prompt tokens, Grok 4 and Grok 4 Fast above
// 128K. Anthropic's cache_write is its 5-minute cache write (1.25 ×
// input); providers that do not bill cache writes apart bill them as
// input.
var builtin = Table{
	// Anthropic (claude.com/pricing, docs.anthropic.com pricing).
	"claude-opus-4-5": {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-opus-4-1": {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4":   {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	// Sonnet 4 and 4.5 with the 1M context window: a prompt above 200K
	// tokens is billed 2× input and 1.5× output, cache rates 2× too.
	"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, Above: sonnetLong},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, Above: sonnetLong},
	"claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-3-5-sonnet": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	"claude-3-haiku":    {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.3},
	"claude-3-opus":     {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},

	// OpenAI (openai.com/api/pricing): cached input is the cache read;
	// OpenAI does not bill cache writes apart.
	"gpt-5":        {Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite: 1.25},
	"gpt-5-mini":   {Input: 0.25, Output: 2, CacheRead: 0.025, CacheWrite: 0.25},
	"gpt-5-nano":   {Input: 0.05, Output: 0.4, CacheRead: 0.005, CacheWrite: 0.05},
	"gpt-5-pro":    {Input: 15, Output: 120, CacheRead: 15, CacheWrite: 15},
	"gpt-4.1":      {Input: 2, Output: 8, CacheRead: 0.5, CacheWrite: 2},
	"gpt-4.1-mini": {Input: 0.4, Output: 1.6, CacheRead: 0.1, CacheWrite: 0.4},
	"gpt-4.1-nano": {Input: 0.1, Output: 0.4, CacheRead: 0.025, CacheWrite: 0.1},
	"gpt-4o":       {Input: 2.5, Output: 10, CacheRead: 1.25, CacheWrite: 2.5},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.6, CacheRead: 0.075, CacheWrite: 0.15},
	"o1":           {Input: 15, Output: 60, CacheRead: 7.5, CacheWrite: 15},
	"o1-pro":       {Input: 150, Output: 600, CacheRead: 150, CacheWrite: 150},
	"o3":           {Input: 2, Output: 8, CacheRead: 0.5, CacheWrite: 2},
	"o3-pro":       {Input: 20, Output: 80, CacheRead: 20, CacheWrite: 20},
	"o3-mini":      {Input: 1.1, Output: 4.4, CacheRead: 0.55, CacheWrite: 1.1},
	"o4-mini":      {Input: 1.1, Output: 4.4, CacheRead: 0.275, CacheWrite: 1.1},

	// Google Gemini API (ai.google.dev/gemini-api/docs/pricing), paid
	// tier, text input: the cache read is the context-caching price
	// (cache storage per hour is not a token price and is not counted).
	"gemini-2.5-pro": {Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite: 1.25,
		Above: Tier{Tokens: 200_000, Input: 2.5, Output: 15, CacheRead: 0.25, CacheWrite: 2.5}},
	"gemini-2.5-flash":      {Input: 0.3, Output: 2.5, CacheRead: 0.03, CacheWrite: 0.3},
	"gemini-2.5-flash-lite": {Input: 0.1, Output: 0.4, CacheRead: 0.01, CacheWrite: 0.1},
	"gemini-2.0-flash":      {Input: 0.1, Output: 0.4, CacheRead: 0.025, CacheWrite: 0.1},
	"gemini-2.0-flash-lite": {Input: 0.075, Output: 0.3, CacheRead: 0.075, CacheWrite: 0.075},

	// Mistral (mistral.ai/pricing, La Plateforme).
	"mistral-large":     {Input: 2, Output: 6, CacheRead: 2, CacheWrite: 2},
	"mistral-medium":    {Input: 0.4, Output: 2, CacheRead: 0.4, CacheWrite: 0.4},
	"mistral-small":     {Input: 0.1, Output: 0.3, CacheRead: 0.1, CacheWrite: 0.1},
	"magistral-medium":  {Input: 2, Output: 5, CacheRead: 2, CacheWrite: 2},
	"magistral-small":   {Input: 0.5, Output: 1.5, CacheRead: 0.5, CacheWrite: 0.5},
	"codestral":         {Input: 0.3, Output: 0.9, CacheRead: 0.3, CacheWrite: 0.3},
	"ministral-8b":      {Input: 0.1, Output: 0.1, CacheRead: 0.1, CacheWrite: 0.1},
	"ministral-3b":      {Input: 0.04, Output: 0.04, CacheRead: 0.04, CacheWrite: 0.04},
	"open-mistral-nemo": {Input: 0.15, Output: 0.15, CacheRead: 0.15, CacheWrite: 0.15},

	// DeepSeek (api-docs.deepseek.com/quick_start/pricing, DeepSeek-V3.2):
	// a cache hit is the cache read, a miss the input.
	"deepseek-chat":     {Input: 0.28, Output: 0.42, CacheRead: 0.028, CacheWrite: 0.28},
	"deepseek-reasoner": {Input: 0.28, Output: 0.42, CacheRead: 0.028, CacheWrite: 0.28},

	// xAI (docs.x.ai/docs/models): cached input is the cache read. Grok 4
	// and Grok 4 Fast charge 2× input and output above 128K tokens of
	// prompt (cached input unchanged).
	"grok-4": {Input: 3, Output: 15, CacheRead: 0.75, CacheWrite: 3,
		Above: Tier{Tokens: 128_000, Input: 6, Output: 30, CacheRead: 0.75, CacheWrite: 6}},
	"grok-4-fast": {Input: 0.2, Output: 0.5, CacheRead: 0.05, CacheWrite: 0.2,
		Above: Tier{Tokens: 128_000, Input: 0.4, Output: 1, CacheRead: 0.05, CacheWrite: 0.4}},
	"grok-code-fast-1": {Input: 0.2, Output: 1.5, CacheRead: 0.02, CacheWrite: 0.2},
	"grok-3":           {Input: 3, Output: 15, CacheRead: 0.75, CacheWrite: 3},
	"grok-3-mini":      {Input: 0.3, Output: 0.5, CacheRead: 0.075, CacheWrite: 0.3},

	// Groq's Llama models (groq.com/pricing).
	"llama-3.1-8b-instant":               {Input: 0.05, Output: 0.08, CacheRead: 0.05, CacheWrite: 0.05},
	"llama-3.3-70b-versatile":            {Input: 0.59, Output: 0.79, CacheRead: 0.59, CacheWrite: 0.59},
	"llama-4-scout-17b-16e-instruct":     {Input: 0.11, Output: 0.34, CacheRead: 0.11, CacheWrite: 0.11},
	"llama-4-maverick-17b-128e-instruct": {Input: 0.2, Output: 0.6, CacheRead: 0.2, CacheWrite: 0.2},
}

// sonnetLong is Claude Sonnet 4 and 4.5's long-context tier.
var sonnetLong = Tier{Tokens: 200_000, Input: 6, Output: 22.5, CacheRead: 0.6, CacheWrite: 7.5}

// Builtin is a copy of the built-in table (as of BuiltinAsOf).
func Builtin() Table { return maps.Clone(builtin) }
