package gateway

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no listener", func(c *Config) { c.Listener = "" }, "Listener"},
		{"body limit", func(c *Config) { c.MaxBodyBytes = 0 }, "MaxBodyBytes"},
		{"timeout", func(c *Config) { c.RequestTimeout = 0 }, "RequestTimeout"},
		{"upload limit", func(c *Config) { c.MaxUploadBytes = -1 }, "MaxUploadBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
