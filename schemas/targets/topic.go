package targets

import (
	"errors"
	"fmt"
)

// ErrBadTopic is wrapped by every ParseTopic error.
var ErrBadTopic = errors.New("bad topic name")

// Topic is a parsed Pub/Sub topic name.
type Topic struct {
	Project string
	ID      string
}

// String renders t as its full name, "projects/P/topics/T".
func (t Topic) String() string {
	return "projects/" + t.Project + "/topics/" + t.ID
}

// ParseTopic parses a full Pub/Sub topic name, "projects/P/topics/T".
// Errors wrap ErrBadTopic and give the form.
func ParseTopic(name string) (Topic, error) {
	m := topicRE.FindStringSubmatch(name)
	if m == nil {
		return Topic{}, fmt.Errorf("%w: %q: use projects/PROJECT/topics/TOPIC", ErrBadTopic, name)
	}
	return Topic{Project: m[1], ID: m[2]}, nil
}
