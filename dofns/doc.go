// Package dofns holds sensorpipe's DoFns: thin wrappers that call the pure
// functions of package schemas and talk to Bigtable, BigQuery and the
// dead-letter store. Every DoFn is registered in its file's init() with the
// generic register helpers, so Beam uses generated callers, not reflection.
package dofns
