package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// replayDropped are the flags a replay command does not take from the run
// it replays: its input, and the options of the input's format.
var replayDropped = []string{"source", "input", "format", "subscription", "replay_reason", "replay_sink", "replay_payload_format",
	"timestamp_attribute", "id_attribute", "early_firing", "late_firing", "allowed_lateness", "pubsub_ack_deadline", "local_state_on_disk",
	"summary_json"}

// replayArgs is the replay command of a run launched with args (os.Args)
// and --format=format: the same stores and options, the input replaced by
// source (flags, in order), as one shell line.
func replayArgs(args []string, sinks []string, format string, source ...string) string {
	out := []string{shellQuote(args[0])}
	skipNext := false
	for _, a := range args[1:] {
		if skipNext {
			skipNext = false
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && dropped(name) {
			skipNext = !hasValue && !isBoolFlag(name)
			continue
		}
		out = append(out, shellQuote(a))
	}
	out = append(out, "--format=deadletter", "--replay_reason="+schemas.ErrWriteFailed.Error())
	if len(sinks) > 0 {
		out = append(out, "--replay_sink="+strings.Join(sinks, ","))
	}
	if format != formatDeadLetter && format != "json" {
		out = append(out, "--replay_payload_format="+shellQuote(format))
	}
	for _, s := range source {
		out = append(out, shellQuote(s))
	}
	return strings.Join(out, " ")
}

func dropped(name string) bool {
	for _, d := range replayDropped {
		if d == name {
			return true
		}
	}
	return false
}

func isBoolFlag(name string) bool { return name == "local_state_on_disk" }

// replayAdvice says how to replay a run's write_failed dead letters of
// sinks in target: the exact command for a folder or gs:// prefix (this
// run's files alone), the command with the subscription to make for a
// Pub/Sub topic, and the export to make first for a BigQuery table. args
// and format are the run's command line and --format.
func replayAdvice(target targets.DeadLetterTarget, sinks []string, args []string, format string) string {
	switch target.Kind {
	case targets.DeadLetterPubSub:
		return fmt.Sprintf("replay them from a subscription on %s made before this run: %s", target.Topic,
			replayArgs(args, sinks, format, "--source=pubsub", "--subscription=projects/"+target.TopicProject()+"/subscriptions/SUBSCRIPTION"))
	case targets.DeadLetterBigQuery:
		return fmt.Sprintf("export the rows of %s with reason write_failed as JSON lines (bq extract --destination_format=NEWLINE_DELIMITED_JSON) and replay them: %s",
			target, replayArgs(args, sinks, format, "--source=files", "--input=EXPORTED_FILES"))
	}
	glob := strings.TrimRight(target.Path, "/") + "/deadletter-*.jsonl"
	if target.Run != "" {
		glob = strings.TrimRight(target.Path, "/") + "/deadletter-" + target.Run + "-*.jsonl"
	}
	return "replay them with: " + replayArgs(args, sinks, format, "--source=files", "--input="+glob)
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
