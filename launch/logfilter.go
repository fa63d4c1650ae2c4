package main

import (
	"context"
	"log/slog"
	"strings"
)

// knownNoise are log messages of Beam Go v2.77 that say nothing actionable.
// "couldn't find plan in finalizing map": the SDK swaps its bundle finalizer
// after a processor's first bundle, so prism's finalize call for later
// bundles finds none and the harness logs an ERROR for most streaming
// bundles. Our Pub/Sub source carries its acks in the residual restriction
// and does not depend on those callbacks (see dofns/pubsubio).
var knownNoise = []string{"couldn't find plan in finalizing map"}

// quietHandler drops knownNoise below debug level and passes the rest on.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.Handler.Enabled(ctx, slog.LevelDebug) {
		for _, n := range knownNoise {
			if strings.Contains(r.Message, n) {
				return nil
			}
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}

// quietenKnownNoise installs quietHandler around the default logger (which
// beam.Init sets up from --log_level).
func quietenKnownNoise() {
	slog.SetDefault(slog.New(quietHandler{slog.Default().Handler()}))
}
