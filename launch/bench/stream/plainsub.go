package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/pubsub/v2"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/launch/bench"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

var (
	plainSubscription = flag.String("plain_subscriber", "", "Run as the -backlog run's plain subscriber on this subscription (full name) until SIGTERM; the -backlog run starts it as a child process.")
	plainStreams      = flag.Int("plain_streams", 16, "-backlog: the plain subscriber's StreamingPull streams (the v2 client's ReceiveSettings.NumGoroutines).")
	plainBatch        = flag.Int("plain_batch", 1000, "-backlog: rows (readings) per ApplyBulk call of the plain subscriber.")
	plainInFlight     = flag.Int("plain_in_flight", 4, "-backlog: ApplyBulk calls the plain subscriber keeps in flight.")
	plainFlushAfter   = flag.Duration("plain_flush_after", 100*time.Millisecond, "-backlog: the plain subscriber writes a batch that is not full once its first row has waited this long.")
)

// plainEntry is one reading's write and the message that brought it.
type plainEntry struct {
	table, key string
	mut        *bigtable.Mutation
	msg        *pubsub.Message
	// last is set on a message's last entry: its write acks the message.
	last bool
}

// plainSubscriber is the baseline of the -backlog comparison, without
// Beam: the v2 client's Receive with -plain_streams streams; each message
// is parsed and checked as the pipeline's parse step does (the spec's
// decoder and Builder.Check), and each reading's cells are the ones the
// local stream writes on arrival (Spec.ArrivalRecord, Builder.Build),
// written as one ApplyBulk entry per reading in batches of -plain_batch,
// -plain_in_flight batches at once; a message is acked once its readings'
// batch is written (nacked if that write fails, so it is redelivered).
type plainSubscriber struct {
	spec    *hours.Compiled
	builder *hours.Builder
	client  *bigtable.Client
	entries chan plainEntry

	messages, rows, calls, writeErrs, rejected atomic.Int64
}

// runPlainSubscriber runs the plain subscriber until SIGTERM or SIGINT,
// then prints what it did on stdout.
func runPlainSubscriber() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *plainStreams < 1 || *plainBatch < 1 || *plainInFlight < 1 || *plainFlushAfter <= 0 {
		return errors.New("-plain_streams, -plain_batch, -plain_in_flight and -plain_flush_after must be positive")
	}
	spec, err := hours.Compile(target.spec, hours.CompileOptions{})
	if err != nil {
		return err
	}
	// The table, as the launcher's start-up makes it.
	if err := bigtableio.EnsureTables(ctx, project, instance, target.spec, true, 10*time.Second); err != nil {
		return err
	}
	btc, err := bigtableio.NewClient(ctx, project, instance)
	if err != nil {
		return err
	}
	defer btc.Close()
	psc, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return fmt.Errorf("pubsub client: %w", err)
	}
	defer psc.Close()
	p := &plainSubscriber{spec: spec, builder: spec.Builder(), client: btc,
		entries: make(chan plainEntry, *plainBatch)}
	sub := psc.Subscriber(*plainSubscription)
	sub.ReceiveSettings.NumGoroutines = *plainStreams
	// Room for the batches in flight and the one filling, twice over:
	// a message holds its place until its batch is written.
	sub.ReceiveSettings.MaxOutstandingMessages = 2 * (*plainInFlight + 1) * *plainBatch
	// On SIGTERM, what was received and not yet written is redelivered.
	sub.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{Timeout: 10 * time.Second, Behavior: pubsub.ShutdownBehaviorWaitForProcessing}

	writerDone := make(chan struct{})
	go func() { defer close(writerDone); p.write(context.WithoutCancel(ctx)) }()
	start := time.Now()
	err = sub.Receive(ctx, p.receive)
	close(p.entries)
	<-writerDone
	fmt.Printf("plain subscriber: %d messages, %d rows written in %d ApplyBulk calls (%d failed), %d rejected readings, over %.1fs\n",
		p.messages.Load(), p.rows.Load(), p.calls.Load(), p.writeErrs.Load(), p.rejected.Load(), time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	return nil
}

// receive parses a message and queues its readings' writes; a message
// whose payload is rejected is acked at once (the comparison publishes
// none).
func (p *plainSubscriber) receive(_ context.Context, m *pubsub.Message) {
	p.messages.Add(1)
	dec := p.spec.Decoder()
	var recs []schemas.Record
	parts, err := dec.Split(m.Data)
	for _, part := range parts {
		if err != nil {
			break
		}
		n := len(recs)
		if recs, err = dec.ParseInput(recs, part, *plainSubscription, codec.Input{Attributes: m.Attributes}); err != nil {
			break
		}
		for i := n; i < len(recs) && err == nil; i++ {
			err = p.builder.Check(&recs[i])
		}
	}
	if err != nil || len(recs) == 0 {
		p.rejected.Add(1)
		m.Ack()
		return
	}
	var out []plainEntry
	for _, r := range recs {
		muts, _ := p.builder.Build([]schemas.Record{hours.ArrivalRecord(p.spec.Spec, r)}, false, func(int) hours.OriginKind { return hours.OriginProvisional })
		for _, rm := range muts {
			_ = bench.ReadingMutations(rm, func(key string, mut *bigtable.Mutation) error {
				out = append(out, plainEntry{table: rm.Table, key: key, mut: mut, msg: m})
				return nil
			})
		}
	}
	if len(out) == 0 {
		m.Ack()
		return
	}
	out[len(out)-1].last = true
	for _, e := range out {
		p.entries <- e
	}
}

// write batches the queued entries and writes each full batch (or one
// whose first entry waited -plain_flush_after) with -plain_in_flight
// ApplyBulk calls at most at once, acking each message whose last entry
// was written.
func (p *plainSubscriber) write(ctx context.Context) {
	sem := make(chan struct{}, *plainInFlight)
	var wg sync.WaitGroup
	var batch []plainEntry
	flush := func() {
		if len(batch) == 0 {
			return
		}
		b := batch
		batch = make([]plainEntry, 0, *plainBatch)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// One call per table (the default spec has one).
			keys, muts := map[string][]string{}, map[string][]*bigtable.Mutation{}
			for _, e := range b {
				keys[e.table], muts[e.table] = append(keys[e.table], e.key), append(muts[e.table], e.mut)
			}
			var err error
			for t := range keys {
				if werr := bench.ApplyBulk(ctx, p.client.Open(t), keys[t], muts[t]); werr != nil {
					err = werr
					p.writeErrs.Add(1)
				}
				p.calls.Add(1)
			}
			if err == nil {
				p.rows.Add(int64(len(b)))
			}
			for _, e := range b {
				switch {
				case err != nil:
					e.msg.Nack() // redelivered
				case e.last:
					e.msg.Ack()
				}
			}
		}()
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case e, ok := <-p.entries:
			if !ok {
				flush()
				wg.Wait()
				return
			}
			if len(batch) == 0 {
				timer.Reset(*plainFlushAfter)
			}
			batch = append(batch, e)
			if len(batch) >= *plainBatch {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}
