// Command publish publishes generated readings of a dataset spec (by
// default the built-in default spec, schemas/specs/DEFAULT) to a Pub/Sub
// topic in real time, one or (--readings_per_message) more readings per message (JSON, or with --format=proto
// the spec's declared protobuf message), for exercising the sensorpipe
// pipeline (locally against the Pub/Sub emulator, or on GCP). Readings come
// from the spec's field declarations (internal/testrig/synth).
//
//	go run ./launch/publish --topic=projects/P/topics/T --rate=2000 --sensors=100 \
//	    --duration=60s --bad_fraction=0.01 --late_fraction=0.01 --late_by=2h [--create] [--format=proto] [--spec=NAME|FILE]
//
// Every message carries the attribute event_ts (the reading's event time in
// epoch milliseconds) and record_id (unique per message, usable for
// deduplication). A fraction of readings is bad (malformed payload, or
// out-of-range values) and a fraction is late (event time late_by in the past).
// PUBSUB_EMULATOR_HOST is honoured, and with it set --topic defaults to the
// topic make stream uses (internal/cli). Progress is printed every 5 s and a
// summary at the end; on bad flags or an unreachable Pub/Sub it exits
// non-zero with a one-line reason.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/sensorclock"
	"github.com/sensorpipe/sensorpipe/internal/testrig/synth"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

type config struct {
	topic, subscription string
	rate                float64
	sensors             int
	duration            time.Duration
	badFraction         float64
	lateFraction        float64
	lateBy              time.Duration
	create              bool
	format              string
	spec                string
	missingFraction     float64
	seed                uint64
	perMessage          int
	batchAs             string
}

var topicRE = regexp.MustCompile(`^projects/([^/]+)/topics/([^/]+)$`)

// newFlagSet is publish's flag set, each flag bound to a field of c.
func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag is one line; --help prints the flags
	fs.Usage = func() {}
	fs.StringVar(&c.topic, "topic", "", "topic, projects/P/topics/T (required; with "+cli.PubSubEmulatorEnv+" set it defaults to projects/"+cli.LocalProject+"/topics/"+cli.LocalTopic+", make stream's)")
	fs.StringVar(&c.subscription, "subscription", "", "with --create: also create this subscription, projects/P/subscriptions/S")
	fs.Float64Var(&c.rate, "rate", 2000, "readings per second (messages per second times --readings_per_message)")
	fs.IntVar(&c.sensors, "sensors", 100, "number of distinct identities (sensors; the values of the spec's identity fields)")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long to publish")
	fs.Float64Var(&c.badFraction, "bad_fraction", 0.01, "fraction of bad records (malformed payload, or a value beyond its declared range)")
	fs.Float64Var(&c.lateFraction, "late_fraction", 0.01, "fraction of late records")
	fs.DurationVar(&c.lateBy, "late_by", 2*time.Hour, "how far in the past late records' event times are")
	fs.BoolVar(&c.create, "create", false, "create the topic (and --subscription) if missing")
	fs.StringVar(&c.format, "format", "json", "payload format: json, or proto (the spec's declared protobuf message, its proto: section)")
	fs.StringVar(&c.spec, "spec", schemas.DefaultSpecName(), cli.SpecUsage)
	fs.Float64Var(&c.missingFraction, "missing_fraction", 0.02, "fraction of the spec's optional fields sent as null")
	fs.Uint64Var(&c.seed, "seed", 0, "random seed (0: time based)")
	fs.IntVar(&c.perMessage, "readings_per_message", 1, "readings each message carries (1..1000): JSON as lines (NDJSON) or an array (--batch_as), proto as the spec's proto.batch wrapper; --rate counts readings")
	fs.StringVar(&c.batchAs, "batch_as", "lines", "with --format=json and --readings_per_message above 1: lines (one reading per line) or array (a JSON array of readings; a malformed reading makes its whole message malformed)")
	return fs
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := newFlagSet(&c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "publish: generated readings of a dataset spec (--spec) to a Pub/Sub topic in real time.\n\n%s\n\nExit codes: 0 published, 1 Pub/Sub failed or could not be reached, 2 bad flags.\n\nFlags:\n", cli.DefaultsHelp)
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
			return c, err
		}
		return c, fmt.Errorf("%w (publish --help lists the flags)", err)
	}
	topic, err := cli.Topic(c.topic)
	if err != nil {
		return c, err
	}
	c.topic = topic
	var sub targets.Subscription
	if c.subscription != "" {
		if sub, err = targets.ParseSubscription(c.subscription); err != nil {
			return c, fmt.Errorf("--subscription: %w", err)
		}
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case !topicRE.MatchString(c.topic):
		return c, fmt.Errorf("--topic=%q must look like projects/P/topics/T", c.topic)
	case c.subscription != "" && !c.create:
		return c, errors.New("--subscription is only used with --create")
	case c.subscription != "" && sub.Project != topicRE.FindStringSubmatch(c.topic)[1]:
		return c, errors.New("--subscription must be in the same project as --topic")
	case !(c.rate > 0) || c.rate > 1e6:
		return c, fmt.Errorf("--rate=%v must be in (0, 1e6]", c.rate)
	case c.sensors <= 0 || c.sensors > 99999:
		return c, fmt.Errorf("--sensors=%d must be in 1..99999", c.sensors)
	case c.duration <= 0:
		return c, fmt.Errorf("--duration=%v must be positive", c.duration)
	case !(c.badFraction >= 0 && c.badFraction <= 1):
		return c, fmt.Errorf("--bad_fraction=%v must be in [0, 1]", c.badFraction)
	case !(c.lateFraction >= 0 && c.lateFraction <= 1):
		return c, fmt.Errorf("--late_fraction=%v must be in [0, 1]", c.lateFraction)
	case c.lateBy < 0:
		return c, fmt.Errorf("--late_by=%v must not be negative", c.lateBy)
	case !(c.missingFraction >= 0 && c.missingFraction <= 1):
		return c, fmt.Errorf("--missing_fraction=%v must be in [0, 1]", c.missingFraction)
	}
	if c.format != "json" && c.format != "proto" {
		return c, fmt.Errorf("--format=%q is unknown (json or proto)", c.format)
	}
	if c.perMessage < 1 || c.perMessage > 1000 {
		return c, fmt.Errorf("--readings_per_message=%d must be in 1..1000", c.perMessage)
	}
	if c.batchAs != "lines" && c.batchAs != "array" {
		return c, fmt.Errorf("--batch_as=%q is unknown (lines or array)", c.batchAs)
	}
	spec, err := cli.LoadSpec(c.spec)
	if err != nil {
		return c, fmt.Errorf("--spec=%s: %w", c.spec, err)
	}
	if _, err := hours.Compile(spec, hours.CompileOptions{Format: c.format}); err != nil {
		return c, fmt.Errorf("--spec=%s --format=%s: %w", c.spec, c.format, err)
	}
	if c.format == "proto" && c.perMessage > 1 && spec.Proto.Batch == nil {
		return c, fmt.Errorf("--readings_per_message=%d --format=proto: spec %s declares no proto.batch wrapper message (proto: {batch: {message: NAME, number: N}}); add one or send one reading per message", c.perMessage, c.spec)
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return c, nil
}

// generator makes the spec's readings (internal/testrig/synth) at the wall clock.
type generator struct {
	cfg   config
	rng   *rand.Rand
	syn   *synth.Generator
	runID string
	seq   int64
	// clock and lateClock give on-time and late readings event times that
	// never repeat an identity's millisecond.
	clock, lateClock sensorclock.Clock
}

func newGenerator(cfg config) (*generator, error) {
	if cfg.spec == "" {
		cfg.spec = schemas.DefaultSpecName()
	}
	spec, err := cli.LoadSpec(cfg.spec)
	if err != nil {
		return nil, err
	}
	c, err := hours.Compile(spec, hours.CompileOptions{Format: cfg.format})
	if err != nil {
		return nil, err
	}
	syn, err := synth.New(c.Spec, synth.Options{IDs: cfg.sensors, MissingShare: cfg.missingFraction, Seed: cfg.seed})
	if err != nil {
		return nil, err
	}
	g := &generator{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15)), syn: syn}
	g.runID = strconv.FormatUint(cfg.seed%1_000_000_007, 36)
	return g, nil
}

// next returns the payload and attributes of the next message, and whether it
// is bad and/or late.
func (g *generator) next(now time.Time) (data []byte, attrs map[string]string, bad, late bool, err error) {
	i := g.rng.IntN(g.cfg.sensors)
	var ms int64
	late = g.rng.Float64() < g.cfg.lateFraction
	if late {
		ms = g.lateClock.Next(i, now.Add(-g.cfg.lateBy))
	} else {
		ms = g.clock.Next(i, now)
	}
	bad = g.rng.Float64() < g.cfg.badFraction
	malformed := bad && g.rng.IntN(2) == 0
	if bad && !malformed {
		var ok bool
		if data, ok = g.syn.AppendOutOfRange(nil, i, ms); !ok {
			malformed = true // the spec bounds no number
		}
	}
	if data == nil {
		data = g.syn.AppendJSON(nil, i, ms)
	}
	if g.cfg.format == "proto" {
		if data, err = g.syn.EncodeProto(nil, data); err != nil {
			return nil, nil, false, false, fmt.Errorf("encode reading: %w", err)
		}
	}
	if malformed {
		// Truncate and append junk: broken in any format.
		data = append(data[:len(data)/2:len(data)/2], []byte(`,"oops":}`)...)
	}
	g.seq++
	attrs = map[string]string{
		"event_ts":  strconv.FormatInt(ms, 10),
		"record_id": g.runID + "-" + strconv.FormatInt(g.seq, 10),
	}
	return data, attrs, bad, late, nil
}

// nextMessage returns the payload and attributes of the next message, of
// the --readings_per_message next readings, and how many of them are bad
// and late. Its event_ts attribute is its first reading's event time.
func (g *generator) nextMessage(now time.Time) (data []byte, attrs map[string]string, bad, late int, err error) {
	n := g.cfg.perMessage
	if n == 1 {
		d, a, b, l, err := g.next(now)
		return d, a, boolInt(b), boolInt(l), err
	}
	if g.cfg.format == "json" && g.cfg.batchAs == "array" {
		data = append(data, '[')
	}
	for i := range n {
		d, a, b, l, err := g.next(now)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		bad, late = bad+boolInt(b), late+boolInt(l)
		if i == 0 {
			attrs = a
		}
		switch {
		case g.cfg.format == "proto":
			data = protowire.AppendTag(data, protowire.Number(g.syn.Spec().Proto.Batch.Number), protowire.BytesType)
			data = protowire.AppendBytes(data, d)
		case g.cfg.batchAs == "array":
			if i > 0 {
				data = append(data, ',')
			}
			data = append(data, d...)
		default:
			if i > 0 {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
	if g.cfg.format == "json" && g.cfg.batchAs == "array" {
		data = append(data, ']')
	}
	return data, attrs, bad, late, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ensure checks that the topic is reachable, creating it (and the
// subscription) with --create.
func ensure(ctx context.Context, client *pubsub.Client, cfg config) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := client.TopicAdminClient.GetTopic(cctx, &pubsubpb.GetTopicRequest{Topic: cfg.topic})
	switch {
	case err == nil:
	case status.Code(err) == codes.NotFound && cfg.create:
		if _, err := client.TopicAdminClient.CreateTopic(cctx, &pubsubpb.Topic{Name: cfg.topic}); err != nil && status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("creating topic %s: %w", cfg.topic, err)
		}
		fmt.Printf("created topic %s\n", cfg.topic)
	case status.Code(err) == codes.NotFound:
		return fmt.Errorf("topic %s does not exist (use --create)", cfg.topic)
	default:
		return fmt.Errorf("cannot reach Pub/Sub: %w", err)
	}
	if cfg.subscription == "" {
		return nil
	}
	_, err = client.SubscriptionAdminClient.CreateSubscription(cctx, &pubsubpb.Subscription{Name: cfg.subscription, Topic: cfg.topic, AckDeadlineSeconds: 60})
	switch {
	case err == nil:
		fmt.Printf("created subscription %s\n", cfg.subscription)
	case status.Code(err) == codes.AlreadyExists:
	default:
		return fmt.Errorf("creating subscription %s: %w", cfg.subscription, err)
	}
	return nil
}

func run(ctx context.Context, cfg config) error {
	project := topicRE.FindStringSubmatch(cfg.topic)[1]
	client, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return fmt.Errorf("cannot create Pub/Sub client: %w", err)
	}
	defer client.Close()
	if err := ensure(ctx, client, cfg); err != nil {
		return err
	}

	pub := client.Publisher(cfg.topic)
	pub.PublishSettings.DelayThreshold = 50 * time.Millisecond
	pub.PublishSettings.CountThreshold = 500
	defer pub.Stop()

	var published, failed, bad, late atomic.Int64
	var firstErr atomic.Value
	results := make(chan *pubsub.PublishResult, 20000)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range results {
				if _, err := r.Get(context.Background()); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					published.Add(1)
				}
			}
		}()
	}

	gen, err := newGenerator(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	end := start.Add(cfg.duration)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	var sent int64
	lastPub, lastAt := int64(0), start
	fmt.Printf("publishing to %s: %.0f readings/s, %d a message, %d sensors, for %v (format %s)\n", cfg.topic, cfg.rate, cfg.perMessage, cfg.sensors, cfg.duration, cfg.format)
loop:
	for {
		select {
		case <-ctx.Done():
			fmt.Println("interrupted")
			break loop
		case now := <-progress.C:
			p := published.Load()
			fmt.Printf("%6.0fs published=%d failed=%d rate=%.0f/s\n", now.Sub(start).Seconds(), p, failed.Load(), float64(p-lastPub)/now.Sub(lastAt).Seconds())
			lastPub, lastAt = p, now
			if p == 0 && failed.Load() > 0 {
				break loop // nothing gets through: report below
			}
		case now := <-tick.C:
			if !now.Before(end) {
				break loop
			}
			due := int64(now.Sub(start).Seconds() * cfg.rate / float64(cfg.perMessage))
			for ; sent < due; sent++ {
				data, attrs, nBad, nLate, err := gen.nextMessage(time.Now())
				if err != nil {
					return fmt.Errorf("encoding reading: %w", err)
				}
				bad.Add(int64(nBad))
				late.Add(int64(nLate))
				results <- pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs})
			}
		}
	}
	pub.Stop() // flush
	close(results)
	wg.Wait()
	elapsed := time.Since(start)
	p := published.Load()
	fmt.Printf("done: published=%d messages (%d readings each) failed=%d bad=%d late=%d readings in %.1fs (%.0f msg/s)\n",
		p, cfg.perMessage, failed.Load(), bad.Load(), late.Load(), elapsed.Seconds(), float64(p)/elapsed.Seconds())
	if f := failed.Load(); f > 0 {
		e, _ := firstErr.Load().(string)
		if p == 0 {
			return fmt.Errorf("cannot reach Pub/Sub: all %d publishes failed: %s", f, e)
		}
		return fmt.Errorf("%d of %d publishes failed: %s", f, f+p, e)
	}
	return nil
}

// main exits 2 on bad flags and 1 when publishing fails (internal/cli).
func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		os.Exit(cli.Report(os.Stderr, "publish", cli.Usage(err)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := cli.Report(os.Stderr, "publish", run(ctx, cfg))
	stop()
	os.Exit(code)
}
