// Command publish publishes generated patient-vitals readings to a Pub/Sub
// topic in real time, one reading per message (JSON, or protobuf with
// --format=proto), for exercising the sensorpipe pipeline (locally against
// the Pub/Sub emulator, or on GCP).
//
//	go run ./launch/publish --topic=projects/P/topics/T --rate=2000 --sensors=100 \
//	    --duration=60s --bad_fraction=0.01 --late_fraction=0.01 --late_by=2h [--create] [--format=proto]
//
// With --format=proto each message is a sensorpipe.v1.Reading
// (schemas/proto/reading.proto) instead of a JSON object.
//
// Every message carries the attribute event_ts (the reading's event time in
// epoch milliseconds) and record_id (unique per message, usable for
// deduplication). A fraction of readings is bad (malformed payload, or
// out-of-range values) and a fraction is late (event time late_by in the past).
// PUBSUB_EMULATOR_HOST is honoured, and with it set --topic defaults to
// projects/local-project/topics/vitals, the topic make stream uses
// (internal/cli). Progress is printed every 5 s and a summary
// at the end; on bad flags or an unreachable Pub/Sub it exits non-zero with a
// one-line reason.
package main

import (
	"context"
	"encoding/json"
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
	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/sensorclock"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/proto/readingpb"
)

// Reading is one generated patient-vitals reading.
type Reading struct {
	SensorID        string    `json:"sensor_id"`
	Timestamp       time.Time `json:"-"`
	HeartRate       *int      `json:"heart_rate"`
	BodyTemperature float64   `json:"body_temperature"`
	SpO2            int       `json:"spO2"`
	BatteryLevel    int       `json:"battery_level"`
}

// Encoder turns a reading into a message payload. It is the hook for
// --format: add an entry to encoders (e.g. "proto") to support a new format.
type Encoder func(Reading) ([]byte, error)

// encoders maps --format values to encoders.
var encoders = map[string]Encoder{
	"json":  encodeJSON,
	"proto": encodeProto,
}

// encodeJSON renders r like
// {"sensor_id":"sensor-0042","timestamp":"2026-11-22T10:15:30.123Z","heart_rate":72,...}.
func encodeJSON(r Reading) ([]byte, error) {
	type wire struct {
		SensorID        string  `json:"sensor_id"`
		Timestamp       string  `json:"timestamp"`
		HeartRate       *int    `json:"heart_rate"`
		BodyTemperature float64 `json:"body_temperature"`
		SpO2            int     `json:"spO2"`
		BatteryLevel    int     `json:"battery_level"`
	}
	return json.Marshal(wire{
		SensorID:        r.SensorID,
		Timestamp:       r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"),
		HeartRate:       r.HeartRate,
		BodyTemperature: r.BodyTemperature,
		SpO2:            r.SpO2,
		BatteryLevel:    r.BatteryLevel,
	})
}

// encodeProto renders r as a sensorpipe.v1.Reading (schemas/proto/
// reading.proto) carrying the same values as encodeJSON's object, so the
// pipeline's --format=proto decoder sees the same reading.
func encodeProto(r Reading) ([]byte, error) {
	m := &readingpb.Reading{
		SensorId:        r.SensorID,
		Timestamp:       &readingpb.Reading_Rfc3339{Rfc3339: r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z")},
		BodyTemperature: proto.Float64(r.BodyTemperature),
		SpO2:            proto.Float64(float64(r.SpO2)),
		BatteryLevel:    proto.Float64(float64(r.BatteryLevel)),
	}
	if r.HeartRate != nil {
		m.HeartRate = proto.Float64(float64(*r.HeartRate))
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode proto reading: %w", err)
	}
	return b, nil
}

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
	seed                uint64
}

var topicRE = regexp.MustCompile(`^projects/([^/]+)/topics/([^/]+)$`)

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag is one line; --help prints the flags
	fs.Usage = func() {}
	fs.StringVar(&c.topic, "topic", "", "topic, projects/P/topics/T (required; with "+cli.PubSubEmulatorEnv+" set it defaults to projects/"+cli.LocalProject+"/topics/"+cli.LocalTopic+", make stream's)")
	fs.StringVar(&c.subscription, "subscription", "", "with --create: also create this subscription, projects/P/subscriptions/S")
	fs.Float64Var(&c.rate, "rate", 2000, "messages per second")
	fs.IntVar(&c.sensors, "sensors", 100, "number of distinct sensors")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long to publish")
	fs.Float64Var(&c.badFraction, "bad_fraction", 0.01, "fraction of bad records (malformed JSON or out-of-range values)")
	fs.Float64Var(&c.lateFraction, "late_fraction", 0.01, "fraction of late records")
	fs.DurationVar(&c.lateBy, "late_by", 2*time.Hour, "how far in the past late records' event times are")
	fs.BoolVar(&c.create, "create", false, "create the topic (and --subscription) if missing")
	fs.StringVar(&c.format, "format", "json", "payload format: json, or proto (a sensorpipe.v1.Reading, schemas/proto/reading.proto)")
	fs.Uint64Var(&c.seed, "seed", 0, "random seed (0: time based)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "publish: generated vitals readings to a Pub/Sub topic in real time.\n\n%s\n\nExit codes: 0 published, 1 Pub/Sub failed or could not be reached, 2 bad flags.\n\nFlags:\n", cli.DefaultsHelp)
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
	var sub schemas.Subscription
	if c.subscription != "" {
		if sub, err = schemas.ParseSubscription(c.subscription); err != nil {
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
	case c.sensors <= 0 || c.sensors > 9999:
		return c, fmt.Errorf("--sensors=%d must be in 1..9999", c.sensors)
	case c.duration <= 0:
		return c, fmt.Errorf("--duration=%v must be positive", c.duration)
	case !(c.badFraction >= 0 && c.badFraction <= 1):
		return c, fmt.Errorf("--bad_fraction=%v must be in [0, 1]", c.badFraction)
	case !(c.lateFraction >= 0 && c.lateFraction <= 1):
		return c, fmt.Errorf("--late_fraction=%v must be in [0, 1]", c.lateFraction)
	case c.lateBy < 0:
		return c, fmt.Errorf("--late_by=%v must not be negative", c.lateBy)
	}
	if _, ok := encoders[c.format]; !ok {
		return c, fmt.Errorf("--format=%q is unknown (json or proto)", c.format)
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return c, nil
}

// generator makes readings; each sensor drifts smoothly around a baseline.
type generator struct {
	cfg   config
	rng   *rand.Rand
	enc   Encoder
	runID string
	hr    []float64
	temp  []float64
	spo2  []float64
	batt  []float64
	seq   int64
	// clock and lateClock give on-time and late readings event times that
	// never repeat a sensor's millisecond.
	clock, lateClock sensorclock.Clock
}

func newGenerator(cfg config) *generator {
	g := &generator{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15)), enc: encoders[cfg.format]}
	g.runID = strconv.FormatUint(cfg.seed%1_000_000_007, 36)
	for i := 0; i < cfg.sensors; i++ {
		g.hr = append(g.hr, 60+g.rng.Float64()*30)
		g.temp = append(g.temp, 36.3+g.rng.Float64()*0.9)
		g.spo2 = append(g.spo2, 95+g.rng.Float64()*4)
		g.batt = append(g.batt, 40+g.rng.Float64()*60)
	}
	return g
}

func clamp(v, lo, hi float64) float64 { return max(lo, min(hi, v)) }

// next returns the payload and attributes of the next message, and whether it
// is bad and/or late.
func (g *generator) next(now time.Time) (data []byte, attrs map[string]string, bad, late bool, err error) {
	i := g.rng.IntN(g.cfg.sensors)
	g.hr[i] = clamp(g.hr[i]+g.rng.NormFloat64(), 45, 150)
	g.temp[i] = clamp(g.temp[i]+g.rng.NormFloat64()*0.02, 35.5, 40)
	g.spo2[i] = clamp(g.spo2[i]+g.rng.NormFloat64()*0.3, 88, 100)
	g.batt[i] = clamp(g.batt[i]-g.rng.Float64()*0.01, 0, 100)
	if g.batt[i] <= 1 {
		g.batt[i] = 100 // recharged
	}
	r := Reading{
		SensorID:        fmt.Sprintf("sensor-%04d", i),
		BodyTemperature: float64(int(g.temp[i]*10+0.5)) / 10,
		SpO2:            int(g.spo2[i] + 0.5),
		BatteryLevel:    int(g.batt[i] + 0.5),
	}
	if g.rng.Float64() >= 0.02 { // heart_rate is sometimes null
		hr := int(g.hr[i] + 0.5)
		r.HeartRate = &hr
	}
	late = g.rng.Float64() < g.cfg.lateFraction
	if late {
		r.Timestamp = time.UnixMilli(g.lateClock.Next(i, now.Add(-g.cfg.lateBy)))
	} else {
		r.Timestamp = time.UnixMilli(g.clock.Next(i, now))
	}
	bad = g.rng.Float64() < g.cfg.badFraction
	malformed := false
	if bad {
		if g.rng.IntN(2) == 0 {
			malformed = true
		} else {
			switch g.rng.IntN(4) { // out-of-range values
			case 0:
				hr := 301 + g.rng.IntN(200) // max is 300, inclusive
				r.HeartRate = &hr
			case 1:
				r.BodyTemperature = 45 + g.rng.Float64()*10
			case 2:
				r.SpO2 = 101 + g.rng.IntN(50)
			default:
				r.BatteryLevel = -1 - g.rng.IntN(50)
			}
		}
	}
	data, err = g.enc(r)
	if err != nil {
		return nil, nil, false, false, err
	}
	if malformed {
		// Truncate and append junk: broken in any format.
		data = append(data[:len(data)/2:len(data)/2], []byte(`,"oops":}`)...)
	}
	g.seq++
	attrs = map[string]string{
		"event_ts":  strconv.FormatInt(r.Timestamp.UnixMilli(), 10),
		"record_id": g.runID + "-" + strconv.FormatInt(g.seq, 10),
	}
	return data, attrs, bad, late, nil
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

	gen := newGenerator(cfg)
	start := time.Now()
	end := start.Add(cfg.duration)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	var sent int64
	lastPub, lastAt := int64(0), start
	fmt.Printf("publishing to %s: %.0f msg/s, %d sensors, for %v (format %s)\n", cfg.topic, cfg.rate, cfg.sensors, cfg.duration, cfg.format)
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
			due := int64(now.Sub(start).Seconds() * cfg.rate)
			for ; sent < due; sent++ {
				data, attrs, isBad, isLate, err := gen.next(time.Now())
				if err != nil {
					return fmt.Errorf("encoding reading: %w", err)
				}
				if isBad {
					bad.Add(1)
				}
				if isLate {
					late.Add(1)
				}
				results <- pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs})
			}
		}
	}
	pub.Stop() // flush
	close(results)
	wg.Wait()
	elapsed := time.Since(start)
	p := published.Load()
	fmt.Printf("done: published=%d failed=%d bad=%d late=%d in %.1fs (%.0f msg/s)\n",
		p, failed.Load(), bad.Load(), late.Load(), elapsed.Seconds(), float64(p)/elapsed.Seconds())
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
