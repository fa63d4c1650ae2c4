package pubsubio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// checkTimeout bounds CheckSubscription when ctx has no deadline (the
// launcher gives it --startup_timeout).
const checkTimeout = 10 * time.Second

// CheckSubscription checks, before a stream starts, that the subscription
// sub exists and Pub/Sub answers before
// ctx's deadline (else within checkTimeout), retrying transient errors, so
// that a typo or a missing subscription is a one-line error saying what to
// do rather than a failed bundle once the job runs.
// PUBSUB_EMULATOR_HOST is honoured. A subscriber without
// pubsub.subscriptions.get passes: its pulls will tell.
func CheckSubscription(ctx context.Context, sub targets.Subscription) error {
	where := "Pub/Sub"
	if host := os.Getenv("PUBSUB_EMULATOR_HOST"); host != "" {
		where = "the Pub/Sub emulator at " + host
	}
	client, err := pubsub.NewSubscriptionAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("subscription %s: creating a Pub/Sub client: %w", sub, err)
	}
	defer client.Close()
	limit := checkTimeout
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl).Round(time.Millisecond)
	}
	err = retry.Do(ctx, retry.Policy{Deadline: limit, AttemptTimeout: limit}, func(ctx context.Context) error {
		_, err := client.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: sub.String()})
		return err
	})
	code := status.Code(err)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, retry.ErrExhausted) {
		code = codes.DeadlineExceeded // the client gave up retrying: no status
	}
	switch code {
	case codes.OK, codes.PermissionDenied:
		return nil
	case codes.NotFound:
		return fmt.Errorf("subscription %s does not exist on %s: create it (gcloud pubsub subscriptions create %s --project=%s --topic=TOPIC)", sub, where, sub.ID, sub.Project)
	case codes.InvalidArgument:
		return fmt.Errorf("subscription %s: %s rejects the name (ids are 3 to 255 letters, digits and -_.~+%%, starting with a letter): %w", sub, where, err)
	case codes.DeadlineExceeded, codes.Unavailable:
		return fmt.Errorf("subscription %s: %s did not answer within %v (is it running?): %w", sub, where, limit, err)
	default:
		return fmt.Errorf("subscription %s: %w", sub, err)
	}
}
