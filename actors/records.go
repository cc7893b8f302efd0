package actors

import "gatehouse/wal"

// recBarrier is the engine's only record type: a snapshot's barrier (no
// payload). Every other type belongs to a domain, which declares it with
// Extension.Owns (docs/architecture.md lists them all). The numbers are
// part of the on-disk format: never reuse or renumber one.
const recBarrier wal.Type = 1

// TypeBarrier is recBarrier, for domains' tests and offline tools that
// walk a log: it belongs to no domain.
const TypeBarrier = recBarrier
