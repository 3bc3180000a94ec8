// Package eventfile is the engine of -events-out (probectl serve and
// agent): a Sink follows a workspace's event buffer (runtime.Follower) and
// writes its records as NDJSON to stdout or to a File, an append-only file
// rotated by size, between lines.
//
// A File is opened as the state directory is: its directory checked up to
// / (runtime.OpenPrivateDir), the file itself never through a symbolic
// link and refused when another user owns or may write it. It holds whole
// lines only: a write that fails removes what it wrote of its last line,
// a file that ends inside a line is cut back when opened, and it is
// fsynced at each rotation and when closed. Its last line, read when
// opened, lets the sink skip the records that the sink before it wrote
// and was killed before it consumed (runtime.FollowOptions.LastLine).
//
// What the lines say (the NDJSON view) is probectl's: the sink is given
// its printer. Package eventfile imports runtime and bpf.
package eventfile
