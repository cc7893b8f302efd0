package llmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// bedrockAuth is a parsed SigV4 Authorization header.
type bedrockAuth struct {
	keyID, date, region, service string
	signed                       []string
}

// parseBedrockAuth reads "AWS4-HMAC-SHA256 Credential=ID/DATE/REGION/
// SERVICE/aws4_request, SignedHeaders=a;b, Signature=hex".
func parseBedrockAuth(h string) (bedrockAuth, error) {
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return bedrockAuth{}, fmt.Errorf("authorization is not AWS4-HMAC-SHA256")
	}
	var a bedrockAuth
	var sig string
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return a, fmt.Errorf("credential scope %q", v)
			}
			a.keyID, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signed = strings.Split(v, ";")
		case "Signature":
			sig = v
		}
	}
	if a.keyID == "" || len(a.signed) == 0 || len(sig) != 64 {
		return a, fmt.Errorf("authorization lacks Credential, SignedHeaders or Signature")
	}
	return a, nil
}

// bedrockSigErr is a refused signature: the status, AWS error type and
// message Bedrock answers with.
type bedrockSigErr struct {
	status      int
	typ, msg    string
	clientFault bool // the client's signer is broken (not a wrong key)
}

// verifySigV4 recomputes r's signature with the registered secret of its
// access key (method, path, query, the signed headers, the SHA-256 of
// body, X-Amz-Date) and compares it with the Authorization header.
func (b *Bedrock) verifySigV4(r *http.Request, body []byte) (keyID string, e *bedrockSigErr) {
	a, err := parseBedrockAuth(r.Header.Get("Authorization"))
	if err != nil {
		return "", &bedrockSigErr{403, "MissingAuthenticationTokenException", "Missing Authentication Token: " + err.Error(), true}
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	switch {
	case err != nil:
		return a.keyID, &bedrockSigErr{403, "InvalidSignatureException", "X-Amz-Date missing or malformed", true}
	case a.date != when.Format("20060102") || a.service != "bedrock" || a.region != b.Region:
		return a.keyID, &bedrockSigErr{403, "InvalidSignatureException", fmt.Sprintf("credential scope %s/%s/%s does not match %s/%s/bedrock", a.date, a.region, a.service, when.Format("20060102"), b.Region), true}
	case time.Since(when).Abs() > 5*time.Minute:
		return a.keyID, &bedrockSigErr{403, "InvalidSignatureException", "Signature expired", true}
	}
	has := map[string]bool{}
	for _, h := range a.signed {
		has[h] = true
	}
	if !has["host"] || !has["x-amz-date"] {
		return a.keyID, &bedrockSigErr{403, "InvalidSignatureException", "host and x-amz-date must be signed", true}
	}
	b.mu.Lock()
	secret, known := b.secrets[a.keyID]
	token := b.tokens[a.keyID]
	b.mu.Unlock()
	if !known {
		return a.keyID, &bedrockSigErr{403, "UnrecognizedClientException", "The security token included in the request is invalid.", false}
	}
	got := r.Header.Get("X-Amz-Security-Token")
	if got != token {
		return a.keyID, &bedrockSigErr{403, "UnrecognizedClientException", "The security token included in the request is invalid.", false}
	}
	if token != "" && !has["x-amz-security-token"] {
		return a.keyID, &bedrockSigErr{403, "InvalidSignatureException", "X-Amz-Security-Token must be signed", true}
	}
	want, err := resignBedrock(r, a, body, aws.Credentials{AccessKeyID: a.keyID, SecretAccessKey: secret, SessionToken: token}, when)
	if err != nil {
		return a.keyID, &bedrockSigErr{403, "InvalidSignatureException", err.Error(), true}
	}
	if want != r.Header.Get("Authorization") {
		return a.keyID, &bedrockSigErr{403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.", false}
	}
	return a.keyID, nil
}

// resignBedrock signs a copy of r holding only its signed headers, in
// the scope of a (region, service), and returns the Authorization header
// that copy gets.
func resignBedrock(r *http.Request, a bedrockAuth, body []byte, creds aws.Credentials, when time.Time) (string, error) {
	u, err := url.Parse("http://" + r.Host + r.RequestURI)
	if err != nil {
		return "", fmt.Errorf("request URI: %w", err)
	}
	c, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("request copy: %w", err)
	}
	c.URL = u
	c.Host = r.Host
	for _, h := range a.signed {
		switch h {
		case "host":
		case "content-length":
			c.ContentLength = r.ContentLength
		default:
			vals := r.Header.Values(h)
			if len(vals) == 0 {
				return "", fmt.Errorf("signed header %s missing", h)
			}
			for _, v := range vals {
				c.Header.Add(h, v)
			}
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, c, hex.EncodeToString(sum[:]), a.service, a.region, when); err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return c.Header.Get("Authorization"), nil
}
