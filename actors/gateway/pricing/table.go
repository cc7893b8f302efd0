package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Table is a price per model name.
type Table map[string]Price

// Validate checks every price of t; the error names the first bad model
// (in name order).
func (t Table) Validate() error {
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for k := range t {
			if !yield(k) {
				return
			}
		}
	}) {
		if strings.TrimSpace(m) == "" {
			return fmt.Errorf("a model name must not be empty")
		}
		if err := t[m].Validate(); err != nil {
			return fmt.Errorf("price of model %q: %w", m, err)
		}
	}
	return nil
}

// FromSettings reads a provider's settings.prices (absent: nil): an
// object of model → price, each validated; the error names the model.
func FromSettings(settings json.RawMessage) (Table, error) {
	if len(settings) == 0 || bytes.Equal(bytes.TrimSpace(settings), []byte("null")) {
		return nil, nil
	}
	var st struct {
		Prices map[string]json.RawMessage `json:"prices"`
	}
	if err := json.Unmarshal(settings, &st); err != nil {
		return nil, fmt.Errorf("settings.prices must be an object of model to price: %w", err)
	}
	if st.Prices == nil {
		return nil, nil
	}
	t := make(Table, len(st.Prices))
	for m, raw := range st.Prices {
		var p Price
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("settings.prices[%q]: %w", m, err)
		}
		t[m] = p
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("settings.prices: %w", err)
	}
	return t, nil
}
