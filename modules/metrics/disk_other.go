//go:build !(linux || darwin || freebsd)

package metrics

import "io/fs"

func diskSpace(string) (free, total uint64, ok bool) { return 0, 0, false }

func usage(fi fs.FileInfo) int64 { return fi.Size() }
