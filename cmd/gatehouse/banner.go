package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
)

// announce tells whoever started the server where to go once both
// listeners are up: the web console, the docs of both APIs; and warns
// when the agent gateway is open to anyone who can reach it. A JSON log
// gets one record instead of the text.
func announce(cfg fileConfig, api, gw net.Addr, lg *slog.Logger, w io.Writer) {
	apiURL, gwURL := "http://"+browsable(api), "http://"+browsable(gw)
	gwDocs := gwURL + "/docs?token=<gateway token>"
	if cfg.Gateway.Token == "" {
		gwDocs = gwURL + "/docs"
	}
	// The warning goes first: "ready" is the last record of a start, so a
	// reader that waits for it has seen everything the start logs.
	if cfg.Gateway.Token == "" {
		lg.Warn("the agent gateway runs in open mode: gateway.token is not set, so anyone who can connect to it "+
			"(any user or program on this host) acts as its admin; set --gateway-token or GATEHOUSE_GATEWAY_TOKEN",
			"addr", gw.String())
	}
	if cfg.Log.Format == "json" {
		lg.Info("ready", "console", apiURL+"/", "api_docs", apiURL+"/api/docs", "gateway", gwURL+"/v1/", "gateway_docs", gwDocs)
	} else {
		fmt.Fprintf(w, "\n  gatehouse is ready\n"+
			"    web console (keys, users)   %s/\n"+
			"    key API docs                %s/api/docs\n"+
			"    agent gateway API           %s/v1/\n"+
			"    agent gateway docs          %s\n\n", apiURL, apiURL, gwURL, gwDocs)
	}
}

// browsable is addr as a browser on this host reaches it: an unspecified
// host (0.0.0.0, ::) becomes the loopback address.
func browsable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
