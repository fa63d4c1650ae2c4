package targets

import (
	"errors"
	"fmt"
	"regexp"
)

var subscriptionRE = regexp.MustCompile(`^projects/([^/]+)/subscriptions/([^/]+)$`)

// ErrBadSubscription is wrapped by every ParseSubscription error.
var ErrBadSubscription = errors.New("bad subscription name")

// Subscription is a parsed Pub/Sub subscription name.
type Subscription struct {
	Project string
	ID      string
}

// String renders s as its full name, "projects/P/subscriptions/S".
func (s Subscription) String() string {
	return "projects/" + s.Project + "/subscriptions/" + s.ID
}

// ParseSubscription parses a full Pub/Sub subscription name,
// "projects/P/subscriptions/S". Each program parses a name once, where it
// reads it (the launcher's and the publisher's flags), and passes the
// Subscription down. Errors wrap ErrBadSubscription and give the form.
func ParseSubscription(name string) (Subscription, error) {
	m := subscriptionRE.FindStringSubmatch(name)
	if m == nil {
		return Subscription{}, fmt.Errorf("%w: %q: use projects/PROJECT/subscriptions/SUBSCRIPTION", ErrBadSubscription, name)
	}
	return Subscription{Project: m[1], ID: m[2]}, nil
}
