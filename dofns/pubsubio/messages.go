package pubsubio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beampubsubio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/pubsubio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	pubsubpb "google.golang.org/genproto/googleapis/pubsub/v1"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
)

func init() {
	dofnreg.DoFn(&fromPubsubMessageFn{}, register.Function2x0[*pubsubpb.PubsubMessage, func(dofns.Message)])
	register.Emitter1[dofns.Message]()
}

// ReadMessages reads cfg.Subscription's messages as PCollection<dofns.Message>,
// the input of the parse (dofns.ParseMessageFn).
//
// Locally (cfg.Dataflow unset), Read stamps each message with its
// timestamp attribute (the publish time when it has none or cannot be
// read) and holds the watermark at it. On Dataflow, Beam's pubsubio reads
// each message with its attributes at its publish time, and is not given
// the timestamp attribute: its native source would not take a message
// that lacks it. On both, the parse stamps each reading with its
// payload's event time and counts a missing, unparseable or disagreeing
// attribute alike.
func ReadMessages(s beam.Scope, cfg Config) (beam.PCollection, error) {
	if !cfg.Dataflow {
		return tryRead(s, cfg)
	}
	s = s.Scope("ReadPubSub")
	msgs := beampubsubio.Read(s, cfg.Subscription.Project, beampubsubio.ReadOptions{
		Subscription:   cfg.Subscription.ID,
		IDAttribute:    cfg.IDAttribute,
		WithAttributes: true,
	})
	return beam.ParDo(s, &fromPubsubMessageFn{}, msgs), nil
}

// fromPubsubMessageFn turns a message read by Beam's pubsubio (on
// Dataflow, with its attributes) into the dofns.Message the local reader emits,
// so that one parse reads both alike.
type fromPubsubMessageFn struct{}

// ProcessElement emits m as a dofns.Message; its event time is its publish
// time, as the local reader gives a message without a timestamp
// attribute.
func (f *fromPubsubMessageFn) ProcessElement(m *pubsubpb.PubsubMessage, emit func(dofns.Message)) {
	if m == nil {
		return
	}
	pt := m.GetPublishTime().AsTime().UnixMilli()
	emit(dofns.Message{ID: m.GetMessageId(), Data: m.GetData(), Attributes: m.GetAttributes(), PublishTime: pt, EventTime: pt})
}
