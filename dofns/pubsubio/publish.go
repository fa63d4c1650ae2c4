package pubsubio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pubsubadmin "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

func init() {
	dofnreg.DoFn(&publishFn{}, register.Function3x1[context.Context, dofns.PubSubMessage, func(deadletter.DeadLetter), error])
}

// PublishConfig is the topic Publish publishes to and how.
type PublishConfig struct {
	Topic targets.Topic
	// Retry bounds each bundle's publishes (zero: retry.Policy's defaults).
	Retry retry.Settings
	// Sink names the sink in dead letters and the run's ledger.
	Sink string
}

// Publish publishes each dofns.PubSubMessage to cfg.Topic and returns, in
// the global window, the dead letters (write_failed, sink cfg.Sink, the
// message's data as payload) of the messages Pub/Sub did not take within
// the retry policy's deadline. A bundle commits once each of its messages
// was published or dead-lettered: at least once.
func Publish(s beam.Scope, cfg PublishConfig, msgs beam.PCollection) beam.PCollection {
	s = s.Scope("pubsub.Publish")
	fn := &publishFn{Project: cfg.Topic.Project, Topic: cfg.Topic.String(), Retry: cfg.Retry, Sink: cfg.Sink}
	return beam.ParDo(s, fn, beam.WindowInto(s.Scope("GlobalWindow"), window.NewGlobalWindows(), msgs))
}

// publishFn publishes messages with the Pub/Sub client (which honours
// PUBSUB_EMULATOR_HOST) and waits for them at the bundle's end.
type publishFn struct {
	Project, Topic, Sink string
	Retry                retry.Settings

	client  *pubsub.Client
	pub     *pubsub.Publisher
	pending []published
	ctrs    ledger.Recorder
}

type published struct {
	msg *pubsub.Message
	res *pubsub.PublishResult
}

// Setup opens the client and the topic's publisher.
func (f *publishFn) Setup(ctx context.Context) error {
	c, err := pubsub.NewClient(ctx, f.Project)
	if err != nil {
		return fmt.Errorf("topic %s: pubsub client: %w", f.Topic, err)
	}
	f.client, f.pub = c, c.Publisher(f.Topic)
	return nil
}

// StartBundle registers the sink's ledger counters.
func (f *publishFn) StartBundle(ctx context.Context, _ func(deadletter.DeadLetter)) {
	f.pending = f.pending[:0]
	f.ctrs.Register(ctx, ledger.RowsKey(f.Sink, f.Topic))
}

// ProcessElement starts one publish.
func (f *publishFn) ProcessElement(ctx context.Context, m dofns.PubSubMessage, _ func(deadletter.DeadLetter)) error {
	f.ctrs.Sink(ctx, f.Sink, f.Topic, hours.OriginReading, ledger.Routed, 1)
	msg := &pubsub.Message{Data: m.Data, Attributes: m.Attributes}
	f.pending = append(f.pending, published{msg, f.pub.Publish(context.WithoutCancel(ctx), msg)})
	return nil
}

// FinishBundle waits for every publish, publishing again those that
// failed until the retry policy's deadline; what still fails then is
// dead-lettered.
func (f *publishFn) FinishBundle(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	b := f.Retry.Policy().Start()
	for len(f.pending) > 0 {
		var again []published
		var first error
		for _, p := range f.pending {
			actx, cancel := b.AttemptContext(ctx)
			_, err := p.res.Get(actx)
			cancel()
			if err == nil {
				f.ctrs.Sink(ctx, f.Sink, f.Topic, hours.OriginReading, ledger.Written, 1)
				f.ctrs.Inc(ctx, ledger.RowsKey(f.Sink, f.Topic), 1)
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if first == nil {
				first = err
			}
			again = append(again, p)
		}
		f.pending = again
		if len(again) == 0 {
			break
		}
		wait, err := b.Next(first)
		if err != nil || !retry.Retryable(first) && !errors.Is(first, context.DeadlineExceeded) {
			for _, p := range again {
				f.ctrs.Sink(ctx, f.Sink, f.Topic, hours.OriginReading, ledger.Failed, 1)
				dead(deadletter.NewDeadLetter(f.Sink, string(p.msg.Data), f.Topic,
					fmt.Errorf("%w: pubsub topic %s: %w", schemas.ErrWriteFailed, f.Topic, first), time.Now()))
			}
			f.pending = f.pending[:0]
			break
		}
		if err := retry.Wait(ctx, wait); err != nil {
			return err
		}
		for i, p := range f.pending {
			f.pending[i].res = f.pub.Publish(context.WithoutCancel(ctx), p.msg)
		}
	}
	return f.ctrs.Commit(ctx)
}

// Teardown stops the publisher and closes the client.
func (f *publishFn) Teardown() error {
	if f.pub != nil {
		f.pub.Stop()
	}
	if f.client != nil {
		return f.client.Close()
	}
	return nil
}

// CheckTopic checks, before a stream starts, that topic exists and Pub/Sub
// answers before ctx's deadline, so that a typo is a one-line error rather
// than dead-lettered records. A publisher without pubsub.topics.get
// passes: its publishes will tell.
func CheckTopic(ctx context.Context, topic targets.Topic) error {
	where := "Pub/Sub"
	if host := os.Getenv("PUBSUB_EMULATOR_HOST"); host != "" {
		where = "the Pub/Sub emulator at " + host
	}
	client, err := pubsubadmin.NewTopicAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("topic %s: creating a Pub/Sub client: %w", topic, err)
	}
	defer client.Close()
	limit := checkTimeout
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl).Round(time.Millisecond)
	}
	err = retry.Do(ctx, retry.Policy{Deadline: limit, AttemptTimeout: limit}, func(ctx context.Context) error {
		_, err := client.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topic.String()})
		return err
	})
	switch status.Code(err) {
	case codes.OK, codes.PermissionDenied:
		return nil
	case codes.NotFound:
		return fmt.Errorf("topic %s does not exist on %s: create it (gcloud pubsub topics create %s --project=%s)", topic, where, topic.ID, topic.Project)
	}
	return fmt.Errorf("topic %s: %s: %w", topic, where, err)
}
