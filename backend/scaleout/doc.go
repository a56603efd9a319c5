// Package scaleout holds the real-process tests of API.md §8: several
// backend replicas on one PostgreSQL database and one Docker engine,
// killed, frozen and thawed while they hold work (issue 11). It has no
// code of its own; the harness is testutil/replicas.
package scaleout
