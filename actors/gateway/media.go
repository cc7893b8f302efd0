package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/blob"
)

// Media: uploaded files (images, audio, documents) served back by id. The
// bytes go to the blob store, durable before the record that names them;
// the record keeps the metadata. The content type is sniffed from the
// bytes and kept only if it is on MediaTypes; anything else is served as
// a download (application/octet-stream).

// MediaTypes are the content types media are served inline as.
var MediaTypes = []string{
	"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp",
	"audio/mpeg", "audio/wave", "audio/ogg", "video/mp4", "video/webm", "application/pdf",
	"text/plain; charset=utf-8",
}

// Media is an uploaded file's metadata.
type Media struct {
	ID        uuid.UUID `json:"id"`
	MimeType  string    `json:"mime_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	Filename  string    `json:"filename,omitempty"`
	UserID    string    `json:"user_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Ref       blob.Ref  `json:"-"`
}

type mediaRec struct {
	ID        uuid.UUID `json:"id"`
	Ref       blob.Ref  `json:"ref"`
	Size      int64     `json:"size"`
	MimeType  string    `json:"mime_type"`
	Filename  string    `json:"filename,omitempty"`
	UserID    string    `json:"user_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func (m *mediaRec) ref() (kind, uuid.UUID) { return kindMedia, m.ID }
func (m *mediaRec) blobRefs() []blob.Ref   { return []blob.Ref{m.Ref} }
func (m *mediaRec) view() Media {
	return Media{ID: m.ID, MimeType: m.MimeType, Size: m.Size, SHA256: m.Ref.String(), Filename: m.Filename,
		UserID: m.UserID, CreatedAt: m.CreatedAt, Ref: m.Ref}
}

// sniff returns the allow-listed type of head, or application/octet-stream.
func sniff(head []byte) string {
	if t := http.DetectContentType(head); slices.Contains(MediaTypes, t) {
		return t
	}
	return "application/octet-stream"
}

// PutMedia stores r (at most limit bytes: ErrTooLarge beyond) as a media
// file of user. The bytes are durable before the record; a crash in
// between leaves an unnamed blob, collected after the next snapshot.
func (g *Gateway) PutMedia(ctx context.Context, r io.Reader, limit int64, filename, user string) (Media, error) {
	if g.blobs == nil {
		return Media{}, fmt.Errorf("media: no blob store: %w", ErrDisabled)
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Media{}, fmt.Errorf("media: read: %w", err)
	}
	head = head[:n]
	if n == 0 {
		return Media{}, fmt.Errorf("file: empty: %w", ErrInvalid)
	}
	ref, size, err := g.blobs.Put(ctx, io.MultiReader(bytes.NewReader(head), r), limit)
	switch {
	case errors.Is(err, blob.ErrTooLarge):
		return Media{}, fmt.Errorf("file: over %d bytes: %w", limit, ErrTooLarge)
	case err != nil:
		return Media{}, fmt.Errorf("media: %w", err)
	}
	defer g.blobs.Release(ref)
	id, err := uuid.NewV7()
	if err != nil {
		return Media{}, err
	}
	if len(filename) > 255 || !ValidUserID(filename) {
		filename = ""
	}
	rec := mediaRec{ID: id, Ref: ref, Size: size, MimeType: sniff(head), Filename: strings.TrimSpace(filename), UserID: user,
		CreatedAt: g.clock.Now().UTC()}
	if err = do(ctx, g, func(r *registry) error { return r.putMedia(rec) }); err != nil {
		return Media{}, err
	}
	return rec.view(), nil
}

func (r *registry) putMedia(rec mediaRec) error {
	if rec.UserID != "" && r.mediaBytesOf(rec.UserID)+rec.Size > r.quota.MediaBytes {
		return errQuota("media bytes", "media_bytes_per_user", r.quota.MediaBytes)
	}
	au := audit{action: "media.upload", entityType: string(kindMedia), entityID: rec.ID.String(),
		summary: fmt.Sprintf("uploaded %s of %d bytes (%s)", rec.MimeType, rec.Size, rec.Ref)}
	return r.commit(au, entitySaved{&rec})
}

// mediaBytesOf is the size of user's media.
func (r *registry) mediaBytesOf(user string) int64 {
	var n int64
	for _, m := range r.part.media.rows {
		if m.UserID == user {
			n += m.Size
		}
	}
	return n
}

// delMedia deletes media id if by may (MayReadMedia's owner rule: its
// uploader, or a trusted backend); its bytes go at the next snapshot's
// collection. ErrNotFound for anyone else.
func (r *registry) delMedia(id uuid.UUID, by Principal) error {
	m, ok := r.part.media.rows[id]
	if !ok || !(by.SeesAll() || by.User != "" && m.UserID == by.User) {
		return ErrNotFound
	}
	au := audit{action: "media.delete", entityType: string(kindMedia), entityID: id.String(),
		summary: fmt.Sprintf("deleted %s of %d bytes", m.MimeType, m.Size)}
	return r.commit(au, entityDeleted{kind: kindMedia, id: id})
}

// DeleteMedia deletes a media file for its uploader or a trusted backend,
// freeing its bytes against Quotas.MediaBytes at once (the blob itself at
// the next snapshot). ErrNotFound.
func (g *Gateway) DeleteMedia(ctx context.Context, p Principal, id uuid.UUID) error {
	return do(ctx, g, func(r *registry) error { return r.delMedia(id, p) })
}

// GetMedia returns a media file's metadata; ErrNotFound.
func (g *Gateway) GetMedia(ctx context.Context, id uuid.UUID) (Media, error) {
	rec, err := read(ctx, g, func(r regView) (*mediaRec, error) { return r.part.media.rows[id], nil })
	if err != nil {
		return Media{}, err
	}
	if rec == nil {
		return Media{}, ErrNotFound
	}
	return rec.view(), nil
}

// OpenMedia opens a media file's bytes (see blob.Store.Open; in cluster
// mode fetched from another node first if missing here, within ctx).
func (g *Gateway) OpenMedia(ctx context.Context, m Media) (*blob.Reader, error) {
	if g.blobs == nil {
		return nil, ErrNotFound
	}
	rd, err := g.blobs.Open(ctx, m.Ref)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("media %s: %w", m.ID, ErrNotFound)
	}
	return rd, err
}
