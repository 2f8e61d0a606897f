//go:build !linux

package main

import "os"

// isTerminal reports whether r is a character device (a terminal, or
// /dev/null, which is then asked and reads an empty answer: no).
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
