package pubsubread

// SetAfterAck installs a hook called after every successful acknowledgement
// of messages whose bundle was committed (finalization callback or checkpoint). Call it before running pipelines.
func SetAfterAck(f func(sub string, n int)) { afterAck = f }
