//go:build !(linux || darwin || freebsd)

package broker

// diskSpace is unknown on this platform; the runtime table then reports
// the data directory as missing.
func diskSpace(string) (free, total uint64, ok bool) { return 0, 0, false }
