package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/bbolt"
)

// TestCorruptWALRefusesStartAndRepairKeepsTheRest: on a real data dir, a
// server writes users and keys and is killed (-9); one bit flips inside a
// key's creation record in the middle of wal.db. The next start refuses,
// naming the record's index and gatehouse repair, and changes nothing;
// gatehouse repair keeps a copy of wal.db, removes only that record and
// reports it (index, type, key id; no secret); the start after it serves
// every user and key created after the bad record.
func TestCorruptWALRefusesStartAndRepairKeepsTheRest(t *testing.T) {
	dataDir := t.TempDir()
	cfgPath := writeConfig(t, dataDir, nil)
	c := startChild(t, cfgPath)
	admin := newClient(c.api)
	admin.login(t, adminEmail, adminPassword)
	var first, victim createdKey
	expect(t, "create key", 201)(admin.do("POST", "/api/keys", map[string]string{"name": "before"}, nil, &first))
	expect(t, "create key", 201)(admin.do("POST", "/api/keys", map[string]string{"name": "victim"}, nil, &victim))
	// Acknowledged after the victim: two users and two keys each.
	const password = "user-password-1"
	type later struct{ email, key string }
	var after []later
	for i := range 2 {
		email := fmt.Sprintf("later%d@example.com", i)
		expect(t, "create user", 201)(admin.do("POST", "/api/users", map[string]any{
			"email": email, "password": password, "plan": "standard", "licenseActive": true,
		}, nil, nil))
		u := newClient(c.api)
		u.login(t, email, password)
		for range 2 {
			var k createdKey
			expect(t, "create key", 201)(u.do("POST", "/api/keys", map[string]string{"name": "after"}, nil, &k))
			after = append(after, later{email: email, key: k.Key})
		}
	}
	c.kill() // SIGKILL: no final snapshot

	walPath := filepath.Join(dataDir, "wal.db")
	idx, last := flipBitInKeyRecord(t, walPath, victim.ID)
	if last-idx < 8 {
		t.Fatalf("the victim's record %d is not in the middle of the log (last %d)", idx, last)
	}
	if snaps, _ := filepath.Glob(filepath.Join(dataDir, "snap", "*.snap")); len(snaps) != 0 {
		t.Fatalf("snapshots %v would cover the record: the test needs it in the WAL only", snaps)
	}
	flipped := readFile(t, walPath)

	code, out := startRefused(t, cfgPath)
	t.Logf("refused start:\n%s", out)
	for _, want := range []string{fmt.Sprintf("index %d ", idx), "gatehouse repair --data-dir " + dataDir} {
		if !strings.Contains(out, want) {
			t.Errorf("refused start's output lacks %q:\n%s", want, out)
		}
	}
	if code == 0 {
		t.Errorf("refused start exited 0")
	}
	if !bytes.Equal(readFile(t, walPath), flipped) {
		t.Errorf("the refused start changed wal.db")
	}

	code, stdout, stderr := runSplit(t, "", nil, "repair", "--data-dir", dataDir)
	t.Logf("gatehouse repair:\n%s%s", stdout, stderr)
	if code != 0 {
		t.Fatalf("gatehouse repair exited %d", code)
	}
	for _, want := range []string{fmt.Sprintf("lost index %d: key created: key id %s", idx, victim.ID), "1 record(s) lost", "wal.db.bak-"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("repair report lacks %q", want)
		}
	}
	if strings.Contains(stdout, victim.Key) || strings.Contains(stdout, victim.Key[len(victim.Key)-12:]) {
		t.Errorf("repair report shows the victim's secret")
	}
	baks, _ := filepath.Glob(walPath + ".bak-*")
	if len(baks) != 1 || !bytes.Equal(readFile(t, baks[0]), flipped) {
		t.Errorf("copies before repair = %v, want one holding wal.db as it was", baks)
	}

	c = startChild(t, cfgPath)
	admin = newClient(c.api)
	admin.login(t, adminEmail, adminPassword)
	expect(t, "key created before the bad record", 200)(admin.do("POST", "/api/keys/validate", nil, map[string]string{"X-API-Key": first.Key}, nil))
	expect(t, "the lost key", 401)(admin.do("POST", "/api/keys/validate", nil, map[string]string{"X-API-Key": victim.Key}, nil))
	for _, l := range after {
		newClient(c.api).login(t, l.email, password)
		expect(t, "key created after the bad record", 200)(admin.do("POST", "/api/keys/validate", nil, map[string]string{"X-API-Key": l.key}, nil))
	}
}

// flipBitInKeyRecord finds, in the closed wal.db at path, the record
// creating key id, flips one bit of its payload (inside the key's name) in
// the live leaf page holding it, and returns its index and the log's last
// index. bbolt stores a value contiguously in its leaf page; the freed
// copies copy-on-write left elsewhere in the file are not touched.
func flipBitInKeyRecord(t *testing.T, path, id string) (idx, last uint64) {
	t.Helper()
	kid, err := uuid.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	var value []byte
	var pages []int
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	pageSize := db.Info().PageSize
	err = db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte("log")).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			last = binary.BigEndian.Uint64(k)
			// version | type 10 (key created) | crc | key id | ...
			if len(v) > 22 && v[1] == 10 && bytes.Equal(v[6:22], kid[:]) {
				idx, value = last, bytes.Clone(v)
			}
		}
		for pgid := 2; ; pgid++ {
			p, perr := tx.Page(pgid)
			if perr != nil {
				return perr
			}
			if p == nil {
				return nil
			}
			if p.Type == "leaf" {
				pages = append(pages, pgid)
			}
		}
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || value == nil {
		t.Fatalf("find key %s's record in %s: %v (found %v)", id, path, err, value != nil)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, pageSize)
	flips := 0
	for _, pgid := range pages {
		if _, err := f.ReadAt(page, int64(pgid*pageSize)); err != nil {
			t.Fatal(err)
		}
		if at := bytes.Index(page, value); at >= 0 {
			// 6 header + 32 (key id, owner) + 1 (name length): the name's first byte.
			off := int64(pgid*pageSize + at + 6 + 32 + 1)
			b := []byte{page[at+6+32+1] ^ 0x04}
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			flips++
		}
	}
	if flips != 1 {
		t.Fatalf("key %s's record found in %d live leaf pages, want 1", id, flips)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return idx, last
}

// startRefused starts the server on cfgPath and returns its exit code and
// output once it exits; it fails t if the server starts serving instead.
func startRefused(t *testing.T, cfgPath string) (int, string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Env = append(environWithout("GATEHOUSE_"), "GATEHOUSE_ADMIN_EMAIL="+adminEmail, "GATEHOUSE_ADMIN_PASSWORD="+adminPassword)
	var out syncBuffer
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	served, scanned := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(scanned)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				select {
				case served <- struct{}{}:
				default:
				}
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-served:
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("gatehouse started serving on a WAL with a corrupt record:\n%s", out.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("gatehouse neither refused nor served in 30s:\n%s", out.String())
	}
	<-scanned // the child's end of the pipe is closed: every line is in
	return cmd.ProcessState.ExitCode(), out.String()
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestRepairCLI: gatehouse repair describes itself on -h, refuses a
// directory without a WAL and a data dir a server holds, and leaves a clean
// WAL untouched (no copy).
func TestRepairCLI(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	code, stdout, stderr := runSplit(t, "", nil, "repair", "-h")
	if code != 0 || !strings.Contains(stdout, "usage: gatehouse repair [flags]") || !strings.Contains(stdout, "-data-dir") {
		t.Errorf("repair -h = %d:\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runSplit(t, "", nil, "repair", "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(stderr, "no wal.db") {
		t.Errorf("repair of an empty dir = %d: %s", code, stderr)
	}
	dataDir := t.TempDir()
	c := startChild(t, writeConfig(t, dataDir, nil))
	code, _, stderr = runSplit(t, "", nil, "repair", "--data-dir", dataDir)
	if code == 0 || !strings.Contains(stderr, "in use by another gatehouse") {
		t.Errorf("repair while the server runs = %d: %s", code, stderr)
	}
	c.stop(t)
	code, stdout, stderr = runSplit(t, "", nil, "repair", "--data-dir", dataDir)
	if code != 0 || !strings.Contains(stdout, "nothing to repair") {
		t.Errorf("repair of a clean WAL = %d:\n%s%s", code, stdout, stderr)
	}
	if baks, _ := filepath.Glob(filepath.Join(dataDir, "wal.db.bak-*")); len(baks) != 0 {
		t.Errorf("repair of a clean WAL made copies %v", baks)
	}
}
