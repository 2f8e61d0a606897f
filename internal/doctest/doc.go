// Package doctest runs the shell commands of the user guides
// (docs/guide/*.md) against a fresh mq, so the guides cannot rot. The
// convention (documented in docs/README.md): an HTML comment
//
//	<!-- doctest -->
//
// on the line before a fenced ```sh block marks it runnable. Options
// after a colon, space-separated:
//
//   - background: every command line of the block starts a process that
//     keeps running until the guide ends (servers); the runner then
//     waits until each 127.0.0.1 address the block listens on accepts
//     connections;
//   - retry: the block is run again until it succeeds (something that
//     becomes true shortly, like a broker's registration);
//   - defaults: the block's processes listen on the guide's free ports
//     instead of the default 9876, 10911, 9090 and 8080 (for a bare
//     `mq dev`);
//   - go (alone, before a ```go block): a whole Go program, built inside
//     the module through a -overlay (so it may import the official client
//     and Quiver's) and run; it must exit 0.
//
// Every 127.0.0.1:PORT in a guide's runnable blocks is replaced by a free
// loopback port (the same one for each PORT within a guide), the blocks
// run in order with bash (-e -o pipefail) in a fresh directory with the
// mq built from this tree first on PATH and QUIVER_NAMESRV pointing at
// the guide's 127.0.0.1:9876, each bounded by a timeout.
package doctest
