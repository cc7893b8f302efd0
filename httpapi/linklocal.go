package httpapi

import (
	"errors"
	"net/netip"
	"net/url"
	"syscall"
)

// An API-managed service (POST/PUT /api/services) may not reach
// link-local addresses, where clouds serve instance metadata and
// credentials (169.254.169.254, fe80::/10, and AWS's fd00:ec2::254),
// unless Config.AllowLinkLocal says so. Services of the config file are
// the operator's own and may. The upstream is checked twice: an address
// written in the URL when the service is saved (400), and every address
// a name resolves to when the proxy dials it (so neither a name such as
// metadata.google.internal nor one that changes its answer later gets
// through); the dial is refused before a packet leaves.

// errLinkLocal is a dial refused by the rule.
var errLinkLocal = errors.New("httpapi: upstream address is link-local (cloud metadata): refused for a service of the API")

// awsMetadataV6 is the IPv6 address of AWS's instance metadata service
// (a unique-local address, not a link-local one).
var awsMetadataV6 = netip.MustParseAddr("fd00:ec2::254")

// linkLocal reports whether a is link-local (IPv4 169.254.0.0/16, IPv6
// fe80::/10, in any form: IPv4-mapped IPv6, with a zone) or a cloud's
// metadata address.
func linkLocal(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	return a.IsLinkLocalUnicast() || a == awsMetadataV6
}

// linkLocalUpstream reports whether the upstream URL raw names a
// link-local address literally; names are checked when dialled.
func linkLocalUpstream(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false // validateService refuses it
	}
	a, err := netip.ParseAddr(u.Hostname())
	return err == nil && linkLocal(a)
}

// refuseLinkLocal is a net.Dialer.Control that refuses a link-local
// address: it runs after the name is resolved, before the connection.
func refuseLinkLocal(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errLinkLocal // not an address: never expected of a resolved dial
	}
	if linkLocal(ap.Addr()) {
		return errLinkLocal
	}
	return nil
}
