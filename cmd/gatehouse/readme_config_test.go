package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEConfigTable: the README's configuration table names every
// GATEHOUSE_* variable and every flag the code reads, and nothing else:
// the variables come from the settings table (flags.go) and from the
// literals of this package's sources (GATEHOUSE_CONFIG, _MASTER_KEY, ...).
func TestREADMEConfigTable(t *testing.T) {
	md, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	section := string(md)
	start := strings.Index(section, "\n## Configuration\n")
	if start < 0 {
		t.Fatal("README.md has no ## Configuration section")
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var table []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
		}
	}
	rows := strings.Join(table, "\n")
	envRe := regexp.MustCompile(`GATEHOUSE_[A-Z][A-Z_]*[A-Z]`)

	want := map[string]bool{}
	for _, s := range settings {
		want[envName(s.name)] = true
		if !strings.Contains(rows, "`--"+s.name+"`") {
			t.Errorf("the configuration table lacks the flag --%s", s.name)
		}
	}
	srcs, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range envRe.FindAllString(string(b), -1) {
			want[v] = true
		}
	}
	for _, flag := range []string{"config", "demo-echo"} {
		if !strings.Contains(rows, "`--"+flag+"`") {
			t.Errorf("the configuration table lacks the flag --%s", flag)
		}
	}
	if len(want) < 12 {
		t.Fatalf("found only %d variables in the code: %v", len(want), want)
	}
	for v := range want {
		if !strings.Contains(rows, v) {
			t.Errorf("the README's configuration table lacks %s", v)
		}
	}
	var extra []string
	for _, v := range envRe.FindAllString(rows, -1) {
		if !want[v] && !slices.Contains(extra, v) {
			extra = append(extra, v)
		}
	}
	if len(extra) > 0 {
		t.Errorf("the README's configuration table names variables the code does not read: %v", extra)
	}
}
