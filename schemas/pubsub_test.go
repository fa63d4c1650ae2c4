package schemas

import "testing"

func TestParseSubscription(t *testing.T) {
	tests := []struct {
		name, project, id string
		ok                bool
	}{
		{"projects/p/subscriptions/s", "p", "s", true},
		{"projects/my-project/subscriptions/vitals-stream", "my-project", "vitals-stream", true},
		{"projects/p/topics/t", "", "", false},
		{"projects/p/subscriptions/", "", "", false},
		{"projects/p/subscriptions/s/extra", "", "", false},
		{"vitals", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		project, id, ok := ParseSubscription(tt.name)
		if project != tt.project || id != tt.id || ok != tt.ok {
			t.Errorf("ParseSubscription(%q) = %q, %q, %v; want %q, %q, %v", tt.name, project, id, ok, tt.project, tt.id, tt.ok)
		}
	}
}
