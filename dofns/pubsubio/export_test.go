package pubsubio

// SetAfterAck installs a hook called after every successful acknowledgement
// of messages whose bundle was committed (finalization callback or checkpoint). Call it before running pipelines.
func SetAfterAck(f func(sub string, n int)) { afterAck = f }

// PendingBundles is how many bundles' acks the readers of subscription sub
// hold for acknowledgement (see pending).
func PendingBundles(sub string) int {
	n := 0
	subscribers.Each(func(k subscriberKey, s *subscriber) {
		if k.sub == sub {
			n += s.pending.len()
		}
	})
	return n
}
