package control

import "gatehouse/wal"

func walRecord(t wal.Type, data string) wal.Record { return wal.Record{Type: t, Data: []byte(data)} }
