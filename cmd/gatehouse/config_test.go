package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseServe(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		file    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c fileConfig)
	}{
		{name: "defaults", check: func(t *testing.T, c fileConfig) {
			if c.DataDir != "./data" || c.Server.Port != 8080 || c.Gateway.Port != 18790 ||
				c.Keys.RotationGracePeriod.d != 24*time.Hour || c.Plans.Standard != 1000 || c.Plans.Premium != 10000 {
				t.Errorf("defaults = %+v", c)
			}
		}},
		{name: "file", file: `{"server":{"port":9000},"keys":{"rotation_grace_period":"2h"},"services":{"openai":{"upstream":"https://api.example.com/v1base","headers":{"Authorization":"Bearer x"}}}}`,
			check: func(t *testing.T, c fileConfig) {
				if c.Server.Port != 9000 || c.Keys.RotationGracePeriod.d != 2*time.Hour || c.Services["openai"].Upstream == "" {
					t.Errorf("file config = %+v", c)
				}
			}},
		{name: "env fills flags not given", file: `{"server":{"port":9000}}`, env: map[string]string{"GATEHOUSE_PORT": "9100", "GATEHOUSE_DATA_DIR": "/tmp/x"},
			check: func(t *testing.T, c fileConfig) {
				if c.Server.Port != 9100 || c.DataDir != "/tmp/x" {
					t.Errorf("port %d data dir %q", c.Server.Port, c.DataDir)
				}
			}},
		{name: "flag beats env", args: []string{"--port", "9200"}, env: map[string]string{"GATEHOUSE_PORT": "9100"},
			check: func(t *testing.T, c fileConfig) {
				if c.Server.Port != 9200 {
					t.Errorf("port %d, want 9200", c.Server.Port)
				}
			}},
		{name: "unknown key", file: `{"server":{"prot":1}}`, wantErr: `unknown field "prot"`},
		{name: "wrong type names field", file: `{"server":{"port":"x"}}`, wantErr: "server.port"},
		{name: "bad duration names field", file: `{"keys":{"rotation_grace_period":"a day"}}`, wantErr: "keys.rotation_grace_period"},
		{name: "negative grace", file: `{"keys":{"rotation_grace_period":"-1h"}}`, wantErr: "keys.rotation_grace_period"},
		{name: "bad port", args: []string{"--port", "70000"}, wantErr: "server.port"},
		{name: "port not a number", env: map[string]string{"GATEHOUSE_PORT": "eighty"}, wantErr: "--port"},
		{name: "bad plan", file: `{"plans":{"standard":0}}`, wantErr: "plans.standard"},
		{name: "bad upstream", file: `{"services":{"x":{"upstream":"ftp://h"}}}`, wantErr: "services.x.upstream"},
		{name: "bad log format", args: []string{"--log-format", "xml"}, wantErr: "log.format"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", file(tt.file)}, args...)
			}
			getenv := func(k string) string { return tt.env[k] }
			c, err := parseServe(args, getenv, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseServe() error = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe() = %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestMaskedConfigHidesSecrets(t *testing.T) {
	c := defaultConfig()
	c.Gateway.Token = "gw-secret"
	c.Services["p"] = serviceConfig{Upstream: "https://x", Headers: map[string]string{"Authorization": "Bearer sk-secret"}}
	m := c.masked()
	if strings.Contains(m, "gw-secret") || strings.Contains(m, "sk-secret") {
		t.Errorf("masked config leaks a secret: %s", m)
	}
	if c.Services["p"].Headers["Authorization"] != "Bearer sk-secret" {
		t.Error("masked() modified the config")
	}
}
