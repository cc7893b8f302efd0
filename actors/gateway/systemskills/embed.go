// Package systemskills holds the skills that ship inside the gatehouse
// binary: each directory is a skill (its SKILL.md and files). They are
// always enabled and cannot be deleted.
package systemskills

import "embed"

// FS holds one directory per system skill.
//
//go:embed */*
var FS embed.FS
