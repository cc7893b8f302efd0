package main

import (
	"fmt"
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
		// FILE in wantErr stands for the config file's path.
		{name: "unknown key", file: `{"server":{"prot":1}}`, wantErr: `config FILE:1:12: unknown key "server.prot"; valid keys here: host, port, secure_cookies, max_body_bytes, request_timeout, session_ttl, metrics_addr`},
		{name: "unknown top-level key", file: `{"sever":{}}`, wantErr: `config FILE:1:2: unknown key "sever"; valid keys here: master_key_file, data_dir, log, server, gateway,`},
		{name: "unknown key in a service", file: `{"services":{"openai":{"upstream":"https://h","timout":"5s"}}}`,
			wantErr: `config FILE:1:47: unknown key "services.openai.timout"; valid keys here: upstream, headers, timeout, max_conns`},
		{name: "unknown key three deep", file: `{"keys":{"max_per_user":{"basic":5}}}`,
			wantErr: `config FILE:1:26: unknown key "keys.max_per_user.basic"; valid keys here: standard, premium`},
		{name: "unknown key after a valid one", file: "{\n  \"wal\": {\"no_sync\": true, \"fsync\": false}\n}",
			wantErr: `config FILE:2:28: unknown key "wal.fsync"; valid keys here: max_batch, no_sync`},
		{name: "syntax error", file: "{\n  \"server\": {\n    \"port\": 9000,\n  }\n}",
			wantErr: `config FILE:4:3: invalid character '}' looking for beginning of object key string`},
		{name: "truncated", file: "{\"server\": {\"port\": 9000", wantErr: `config FILE:1:24: unexpected end of JSON input`},
		{name: "data after the object", file: `{"server":{}} {}`, wantErr: `config FILE:1:15: invalid character '{' after top-level value`},
		{name: "wrong type", file: `{"server":{"port":"x"}}`, wantErr: `config FILE:1:19: server.port: want an integer, got a string`},
		{name: "fraction for an integer", file: `{"server":{"port":80.5}}`, wantErr: `config FILE:1:19: server.port: want an integer, got 80.5`},
		{name: "negative for unsigned", file: `{"snapshot":{"every_records":-1}}`, wantErr: `snapshot.every_records: want an integer >= 0, got -1`},
		{name: "object for a bool", file: `{"wal":{"no_sync":{}}}`, wantErr: `config FILE:1:19: wal.no_sync: want true or false, got an object`},
		{name: "number for a duration", file: `{"services":{"a":{"timeout":5}}}`,
			wantErr: `config FILE:1:29: services.a.timeout: want a duration string such as "24h", got 5`},
		{name: "string for a header map", file: `{"services":{"a":{"headers":"x"}}}`, wantErr: `services.a.headers: want an object, got a string`},
		{name: "array for the file", file: `[]`, wantErr: `config FILE:1:1: want an object, got an array`},
		{name: "bad duration", file: `{"keys":{"rotation_grace_period":"a day"}}`,
			wantErr: `config FILE: keys.rotation_grace_period must be a duration such as "24h" or "500ms", not "a day"`},
		{name: "negative grace", file: `{"keys":{"rotation_grace_period":"-1h"}}`, wantErr: "config FILE: keys.rotation_grace_period must be >= 0"},
		{name: "bad port", args: []string{"--port", "70000"}, wantErr: "--port=70000: server.port must be in 0..65535"},
		{name: "bad port from env", file: `{"server":{"port":9000}}`, env: map[string]string{"GATEHOUSE_PORT": "99999"},
			wantErr: "GATEHOUSE_PORT=99999: server.port must be in 0..65535"},
		{name: "bad port from file", file: `{"server":{"port":99999}}`, env: map[string]string{"GATEHOUSE_HOST": "::1"},
			wantErr: "config FILE: server.port must be in 0..65535"},
		{name: "token from env masked", env: map[string]string{"GATEHOUSE_GATEWAY_HOST": "0.0.0.0", "GATEHOUSE_GATEWAY_TOKEN": "short-secret"},
			wantErr: "GATEHOUSE_GATEWAY_TOKEN=***: gateway.token must be at least 32 characters"},
		{name: "port not a number", env: map[string]string{"GATEHOUSE_PORT": "eighty"}, wantErr: "GATEHOUSE_PORT=eighty: server.port must be an integer"},
		{name: "port flag not a number", args: []string{"--gateway-port", "x"}, wantErr: "--gateway-port=x: gateway.port must be an integer"},
		{name: "same port twice", args: []string{"--port", "9000", "--gateway-port", "9000"},
			wantErr: "--gateway-port=9000: gateway.port must differ from server.port (9000): the two listeners cannot share a port"},
		{name: "same port, other hosts", args: []string{"--port", "9000", "--gateway-port", "9000", "--gateway-host", "127.0.0.2", "--gateway-token", "t"},
			check: func(t *testing.T, c fileConfig) {
				if c.Gateway.Port != 9000 || c.Server.Port != 9000 {
					t.Errorf("ports %d %d", c.Server.Port, c.Gateway.Port)
				}
			}},
		{name: "metrics on the api port", file: `{"server":{"metrics_addr":"127.0.0.1:8080"}}`,
			wantErr: "config FILE: server.metrics_addr must differ from server.port (8080)"},
		{name: "bad plan", file: `{"plans":{"standard":0}}`, wantErr: "config FILE: plans.standard must be in 1..1000000000"},
		{name: "bad upstream", file: `{"services":{"x":{"upstream":"ftp://h"}}}`, wantErr: "config FILE: services.x.upstream must be an http:// or https:// URL"},
		{name: "bad log format", args: []string{"--log-format", "xml"}, env: map[string]string{"GATEHOUSE_LOG_FORMAT": "json"},
			wantErr: `--log-format=xml: log.format must be "text" or "json"`},
		{name: "gateway bounds default", check: func(t *testing.T, c fileConfig) {
			if c.Gateway.MCPMaxMessageBytes != 16<<20 || c.Gateway.WebhookMaxInFlight != 16 {
				t.Errorf("mcp_max_message_bytes %d, webhook_max_in_flight %d; want 16 MiB, 16", c.Gateway.MCPMaxMessageBytes, c.Gateway.WebhookMaxInFlight)
			}
		}},
		{name: "gateway bounds", file: `{"gateway":{"mcp_max_message_bytes":1048576,"webhook_max_in_flight":2}}`, env: map[string]string{"GATEHOUSE_GATEWAY_WEBHOOK_MAX_IN_FLIGHT": "4"},
			check: func(t *testing.T, c fileConfig) {
				if c.Gateway.MCPMaxMessageBytes != 1<<20 || c.Gateway.WebhookMaxInFlight != 4 {
					t.Errorf("mcp_max_message_bytes %d, webhook_max_in_flight %d; want 1048576, 4", c.Gateway.MCPMaxMessageBytes, c.Gateway.WebhookMaxInFlight)
				}
			}},
		{name: "bad mcp bound", args: []string{"--gateway-mcp-max-message-bytes", "100"},
			wantErr: "--gateway-mcp-max-message-bytes=100: gateway.mcp_max_message_bytes must be in 4096..1073741824"},
		{name: "bad webhook bound", file: `{"gateway":{"webhook_max_in_flight":0}}`, wantErr: "config FILE: gateway.webhook_max_in_flight must be in 1..1000000"},
		{name: "link-local services off by default", check: func(t *testing.T, c fileConfig) {
			if c.Server.ServicesAllowLinkLocal {
				t.Error("server.services_allow_link_local is on by default")
			}
		}},
		{name: "link-local services from the file", file: `{"server":{"services_allow_link_local":true}}`, check: func(t *testing.T, c fileConfig) {
			if !c.Server.ServicesAllowLinkLocal {
				t.Error("server.services_allow_link_local: true not read")
			}
		}},
		{name: "link-local services from env", env: map[string]string{"GATEHOUSE_SERVICES_ALLOW_LINK_LOCAL": "true"}, check: func(t *testing.T, c fileConfig) {
			if !c.Server.ServicesAllowLinkLocal {
				t.Error("GATEHOUSE_SERVICES_ALLOW_LINK_LOCAL=true not read")
			}
		}},
		{name: "link-local services not a bool", args: []string{"--services-allow-link-local", "yes"},
			wantErr: "--services-allow-link-local=yes: server.services_allow_link_local must be true or false"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", file(tt.file)}, args...)
			}
			getenv := func(k string) string { return tt.env[k] }
			c, err := parseServe("serve", args, getenv, io.Discard, io.Discard)
			if tt.wantErr != "" {
				want := tt.wantErr
				if tt.file != "" {
					want = strings.ReplaceAll(want, "FILE", args[1])
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("parseServe() error = %v, want one containing %q", err, want)
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

// TestValidateNamesSource: a validation error names what set the bad value:
// the environment variable or flag (setBy), else the file, else the defaults.
func TestValidateNamesSource(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *fileConfig)
		want string
	}{
		{"env", func(c *fileConfig) {
			c.Server.Port = 99999
			c.setBy("server.port", "GATEHOUSE_PORT", "99999")
		}, "GATEHOUSE_PORT=99999: server.port must be in 0..65535"},
		{"flag", func(c *fileConfig) {
			c.Log.Format = "xml"
			c.setBy("log.format", "--log-format", "xml")
		}, "--log-format=xml: log.format must be "},
		{"secret masked", func(c *fileConfig) {
			c.Gateway.Host, c.Gateway.Token = "0.0.0.0", "short-secret"
			c.setBy("gateway.token", "GATEHOUSE_GATEWAY_TOKEN", "short-secret")
		}, "GATEHOUSE_GATEWAY_TOKEN=***: gateway.token must be at least 32 characters"},
		{"file", func(c *fileConfig) {
			c.file, c.Plans.Premium = "/etc/gatehouse.json", 0
			c.setBy("server.port", "GATEHOUSE_PORT", "9000") // another key
		}, "config /etc/gatehouse.json: plans.premium must be in 1..1000000000"},
		{"defaults", func(c *fileConfig) { c.Gateway.Host = "0.0.0.0" },
			`config: gateway.token must be set unless gateway.host is a loopback address (got "0.0.0.0")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaultConfig()
			tt.set(&c)
			err := c.validate()
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("validate() = %v, want %q...", err, tt.want)
			}
			if strings.Contains(err.Error(), "short-secret") {
				t.Errorf("validate() = %v shows the token", err)
			}
		})
	}
}

// TestDecodeStrict: decodeStrict on shapes the config does not have
// (arrays, characters beyond ASCII) and on a document it accepts.
func TestDecodeStrict(t *testing.T) {
	type item struct {
		Name string `json:"name"`
		Tags []int  `json:"tags"`
	}
	type doc struct {
		Title string `json:"title"`
		Items []item `json:"items"`
	}
	tests := []struct {
		in, want string
	}{
		{`{"items":[{"name":"a"},{"nmae":"b"}]}`, `1:25: unknown key "items[1].nmae"; valid keys here: name, tags`},
		{`{"items":[{"name":"a","tags":[1,"2"]}]}`, `1:33: items[0].tags[1]: want an integer, got a string`},
		{"{\"title\": \"résumé\" \"items\": []}", `1:20: invalid character '"' after object key:value pair`},
		{`{"Title":"x","ITEMS":[{"NAME":"y"}],"items":null}`, ""}, // keys match as encoding/json matches them
	}
	for _, tt := range tests {
		var d doc
		err := decodeStrict([]byte(tt.in), &d)
		if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
			t.Errorf("decodeStrict(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}
