package targets

import (
	"errors"
	"testing"
)

func TestParseSubscription(t *testing.T) {
	tests := []struct {
		name string
		want Subscription
		ok   bool
	}{
		{"projects/p/subscriptions/s", Subscription{"p", "s"}, true},
		{"projects/my-project/subscriptions/readings-stream", Subscription{"my-project", "readings-stream"}, true},
		{"projects/p/topics/t", Subscription{}, false},
		{"projects/p/subscriptions/", Subscription{}, false},
		{"projects/p/subscriptions/s/extra", Subscription{}, false},
		{"readings", Subscription{}, false},
		{"", Subscription{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSubscription(tt.name)
			if !tt.ok {
				if !errors.Is(err, ErrBadSubscription) {
					t.Fatalf("ParseSubscription(%q) error %v; want ErrBadSubscription", tt.name, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSubscription(%q) = %+v, %v; want %+v", tt.name, got, err, tt.want)
			}
			if got.String() != tt.name {
				t.Errorf("String() = %q; want %q back", got, tt.name)
			}
		})
	}
}
