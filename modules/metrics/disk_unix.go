//go:build linux || darwin || freebsd

package metrics

import (
	"io/fs"
	"syscall"
)

// diskSpace returns the free (available to unprivileged users) and total
// bytes of the file system holding dir.
func diskSpace(dir string) (free, total uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), true
}

// usage is the disk space a file takes (sparse, preallocated segments
// count what is allocated).
func usage(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
