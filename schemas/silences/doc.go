// Package silences is the stream's silence rule: one sensor's track of its readings (SilenceTrack), the silence and resumed records its gaps raise, their ids and JSON, their rows in the silences table, and the compact state and batches the stream keeps.
package silences
