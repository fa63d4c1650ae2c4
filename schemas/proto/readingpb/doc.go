// Package readingpb holds the Go code generated from
// schemas/proto/reading.proto: the sensorpipe.v1.Reading message that
// --format=proto payloads carry. Regenerate it with `make proto`; convert a
// payload to the JSON contract with schemas.ProtoReadingToJSON.
package readingpb
