// Package dofns holds sensorpipe's DoFns: thin wrappers that call the pure
// functions of package schemas and talk to Bigtable, BigQuery and the
// dead-letter store. Every DoFn is registered in its file's init() with
// internal/dofnreg, so that Beam calls each element through the caller its
// generic register helpers generate, not through reflection.
package dofns
