//go:build linux || darwin || freebsd

package broker

import "syscall"

// diskSpace returns the free and total bytes of the file system holding
// dir, free as Java's File.getFreeSpace counts it (all unallocated
// blocks, the root reserve included).
func diskSpace(dir string) (free, total uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Bfree) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), true
}
