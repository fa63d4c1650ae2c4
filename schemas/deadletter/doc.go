// Package deadletter is the dead-letter envelope: a record no sink took, with its reason and where it came from (DeadLetter, ParseEnvelope), the sinks a dead letter names, and the sources that carry a record's place and a replay's context (LineSource, HourSource, ReplaySinks).
package deadletter
