package gateway

import (
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

// MediaStore is what media need from the gateway. Safe for concurrent use.
type MediaStore interface {
	PutMedia(ctx context.Context, r io.Reader, limit int64, filename, user string) (gateway.Media, error)
	GetMedia(ctx context.Context, id uuid.UUID) (gateway.Media, error)
	OpenMedia(ctx context.Context, m gateway.Media) (io.ReadCloser, error)
	// DeleteMedia deletes a file for its uploader or a trusted backend;
	// gateway.ErrNotFound for anyone else.
	DeleteMedia(ctx context.Context, p gateway.Principal, id uuid.UUID) error
}

// mediaAdapter adapts *gateway.Gateway (OpenMedia returns its own reader
// type) to MediaStore.
type mediaAdapter struct{ *gateway.Gateway }

func (m mediaAdapter) OpenMedia(ctx context.Context, md gateway.Media) (io.ReadCloser, error) {
	return m.Gateway.OpenMedia(ctx, md)
}

type uploadIn struct {
	ContentType string    `header:"Content-Type" json:"-"`
	Body        io.Reader `body:"multipart/form-data" json:"-"`
}

// file returns the upload's multipart field "file" and its file name, or,
// for another content type, the body itself.
func (in uploadIn) file() (io.Reader, string, error) {
	mt, params, err := mime.ParseMediaType(in.ContentType)
	if err != nil || mt != "multipart/form-data" {
		return in.Body, "", nil
	}
	mr := multipart.NewReader(in.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, "", errInvalid("file: no multipart field \"file\"")
		}
		if p.FormName() == "file" {
			return p, p.FileName(), nil
		}
	}
}

type uploadOut struct {
	gateway.Media
	URL string `json:"url"`
}

// uploadMedia stores the multipart field "file" (or, for another content
// type, the body itself) as a media file of the caller's user.
func (s *Server) uploadMedia(ctx context.Context, c Caller, in uploadIn) (uploadOut, error) {
	if in.Body == nil {
		return uploadOut{}, errInvalid("file: required (multipart/form-data field \"file\")")
	}
	r, name, err := in.file()
	if err != nil {
		return uploadOut{}, err
	}
	m, err := s.d.Media.PutMedia(ctx, r, int64(s.cfg.MaxUploadBytes), name, c.UserID)
	if err != nil {
		return uploadOut{}, err
	}
	return uploadOut{Media: m, URL: "/v1/media/" + m.ID.String()}, nil
}

type mediaIn struct {
	ID          string `path:"id" json:"-"`
	Range       string `header:"Range" json:"-"`
	IfNoneMatch string `header:"If-None-Match" json:"-"`
}

// deleteMedia deletes a media file for its uploader (or a trusted
// backend), which frees its bytes against the uploader's quota.
func (s *Server) deleteMedia(ctx context.Context, c Caller, in idIn) (None, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return None{}, errNotFound
	}
	return None{}, s.d.Media.DeleteMedia(ctx, c.principal(), id)
}

// getMedia serves a media file: its allow-listed type (anything else as
// an attachment), nosniff, an ETag from its hash (304 on a match),
// immutable caching, and one byte range. A non-admin caller reads their
// own user's files only.
func (s *Server) getMedia(ctx context.Context, c Caller, in mediaIn) (Body, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return Body{}, errNotFound
	}
	m, err := s.d.Media.GetMedia(ctx, id)
	if err != nil {
		return Body{}, err
	}
	if !c.principal().MayReadMedia(m.UserID) {
		return Body{}, errNotFound
	}
	h := map[string]string{
		"ETag": `"` + m.SHA256 + `"`, "X-Content-Type-Options": "nosniff", "Accept-Ranges": "bytes",
		"Cache-Control": "private, max-age=31536000, immutable",
	}
	if m.MimeType == "application/octet-stream" {
		h["Content-Disposition"] = "attachment"
	}
	if in.IfNoneMatch != "" && strings.Contains(in.IfNoneMatch, m.SHA256) {
		return Body{Status: http.StatusNotModified, Header: h}, nil
	}
	rd, err := s.d.Media.OpenMedia(ctx, m)
	if err != nil {
		return Body{}, err
	}
	return serveRange(rd, m.Size, m.MimeType, in.Range, h)
}

// serveRange answers rd (size bytes): whole, or the one range asked
// ("bytes=a-b", "bytes=a-", "bytes=-n") with 206, or 416.
func serveRange(rd io.ReadCloser, size int64, ctype, rng string, h map[string]string) (Body, error) {
	if rng == "" {
		return Body{ContentType: ctype, Header: h, Stream: rd, Size: size}, nil
	}
	start, end, ok := parseByteRange(rng, size)
	if !ok {
		rd.Close()
		h["Content-Range"] = fmt.Sprintf("bytes */%d", size)
		return Body{Status: fasthttp.StatusRequestedRangeNotSatisfiable, ContentType: "text/plain", Header: h}, nil
	}
	if _, err := io.CopyN(io.Discard, rd, start); err != nil {
		rd.Close()
		return Body{}, fmt.Errorf("range: %w", err)
	}
	h["Content-Range"] = fmt.Sprintf("bytes %d-%d/%d", start, end, size)
	return Body{Status: fasthttp.StatusPartialContent, ContentType: ctype, Header: h,
		Stream: struct {
			io.Reader
			io.Closer
		}{io.LimitReader(rd, end-start+1), rd}, Size: end - start + 1}, nil
}

// parseByteRange reads one byte range of a body of size bytes.
func parseByteRange(rng string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(rng), "bytes=")
	if !found || strings.Contains(spec, ",") || size == 0 {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	if a == "" { // the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false
	}
	end = size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return 0, 0, false
		}
		end = min(end, size-1)
	}
	return start, end, true
}
