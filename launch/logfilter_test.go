package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietHandlerDropsKnownNoiseOnlyBelowDebug(t *testing.T) {
	for _, tt := range []struct {
		level slog.Level
		want  bool // noise shown
	}{{slog.LevelWarn, false}, {slog.LevelDebug, true}} {
		var buf bytes.Buffer
		l := slog.New(quietHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tt.level})})
		l.Error("[SDK] finalize bundle failed for instruction inst7: couldn't find plan in finalizing map")
		l.Error("bigtable: real trouble")
		out := buf.String()
		if !strings.Contains(out, "real trouble") {
			t.Errorf("level %v: other errors dropped: %q", tt.level, out)
		}
		if got := strings.Contains(out, "finalizing map"); got != tt.want {
			t.Errorf("level %v: noise shown = %v; want %v", tt.level, got, tt.want)
		}
	}
}
