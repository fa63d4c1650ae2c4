// Package codec turns payloads into records and records into their envelopes: the JSON and protobuf decoders, a Pub/Sub message's readings, the dead-letter envelope and the sources replays carry, the record binary codec, the held-state encoding and a record's canonical JSON.
package codec
