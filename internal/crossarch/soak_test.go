//go:build soak && linux && amd64

package crossarch

// make soak (-tags soak) runs every target with the full load.
func init() { soakBuild = true }
