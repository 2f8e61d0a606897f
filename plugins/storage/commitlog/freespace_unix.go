//go:build linux || darwin || freebsd

package commitlog

import "syscall"

// freeSpace reads the bytes available to the store on dir's file system.
func freeSpace(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true //nolint:unconvert,gosec // field types differ by platform
}
