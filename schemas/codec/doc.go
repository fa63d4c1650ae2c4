// Package codec turns payloads into records and records into bytes: the JSON and protobuf decoders, a Pub/Sub message's readings, table-file rows, the record binary codec, the held-state encoding and a record's canonical JSON.
package codec
