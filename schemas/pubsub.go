package schemas

import "regexp"

var subscriptionRE = regexp.MustCompile(`^projects/([^/]+)/subscriptions/([^/]+)$`)

// ParseSubscription splits a Pub/Sub subscription name,
// "projects/P/subscriptions/S", into its project and subscription id; ok is
// false for any other form. The launcher, the local Pub/Sub source, the
// Dataflow read and the publisher all check names with it.
func ParseSubscription(name string) (project, id string, ok bool) {
	m := subscriptionRE.FindStringSubmatch(name)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
