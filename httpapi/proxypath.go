package httpapi

import "bytes"

var v1Segment = []byte("/v1/")

// parseProxyPath splits the raw (still percent-encoded) request path
// "/api/proxy/{service}/v1/{rest}" into the service name and the suffix
// "/v1/{rest}" that is appended to the upstream's base path. It reports
// false, without allocating, if the path has another shape: no service,
// no "/v1/" right after it, or a dot segment ("." or "..", also
// percent-encoded or behind a backslash) that could climb out of the
// upstream's base path. The results alias path.
func parseProxyPath(path []byte) (service, suffix []byte, ok bool) {
	if !bytes.HasPrefix(path, proxyPrefix) {
		return nil, nil, false
	}
	rest := path[len(proxyPrefix):]
	i := bytes.IndexByte(rest, '/')
	if i <= 0 {
		return nil, nil, false
	}
	service, suffix = rest[:i], rest[i:]
	if !bytes.HasPrefix(suffix, v1Segment) || hasDotSegment(suffix) || hasSmuggling(suffix) {
		return nil, nil, false
	}
	return service, suffix, true
}

// hasSmuggling reports what upstream servers may decode into something
// else: an encoded NUL or control byte, and a double-encoded dot, slash,
// backslash or NUL ("%252e" decodes to "%2e", then to ".").
func hasSmuggling(p []byte) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < 0x20 || c == 0x7f {
			return true
		}
		if c != '%' || i+2 >= len(p) {
			continue
		}
		h := [2]byte{p[i+1] | 0x20, p[i+2] | 0x20} // lower case
		switch {
		case h[0] == '0' || h[0] == '1' || h == [2]byte{'7', 'f'}: // %00..%1f, %7f
			return true
		case h == [2]byte{'2', '5'} && i+4 < len(p):
			d := [2]byte{p[i+3] | 0x20, p[i+4] | 0x20}
			if d == [2]byte{'2', 'e'} || d == [2]byte{'2', 'f'} || d == [2]byte{'5', 'c'} || d[0] == '0' {
				return true
			}
		}
	}
	return false
}

// hasDotSegment reports whether p has a segment that is "." or "..",
// reading %2e as a dot and '\', %2f and %5c as separators, as lenient
// upstream servers do.
func hasDotSegment(p []byte) bool {
	dots, other := 0, false
	for i := 0; i <= len(p); i++ {
		sep, dot, width := true, false, 1
		if i < len(p) {
			sep, dot, width = classifyPathByte(p[i:])
		}
		switch {
		case sep:
			if !other && (dots == 1 || dots == 2) {
				return true
			}
			dots, other = 0, false
		case dot:
			dots++
		default:
			other = true
		}
		i += width - 1
	}
	return false
}

// classifyPathByte classifies the character at the start of p, which is
// one byte or a three-byte percent escape.
func classifyPathByte(p []byte) (sep, dot bool, width int) {
	switch p[0] {
	case '/', '\\', ';': // ';' starts a path parameter: "..;x" is ".." to some servers
		return true, false, 1
	case '.':
		return false, true, 1
	case '%':
		if len(p) >= 3 {
			switch {
			case p[1] == '2' && (p[2] == 'e' || p[2] == 'E'):
				return false, true, 3
			case p[1] == '2' && (p[2] == 'f' || p[2] == 'F'), p[1] == '5' && (p[2] == 'c' || p[2] == 'C'):
				return true, false, 3
			}
		}
	}
	return false, false, 1
}
