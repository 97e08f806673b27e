package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	errClosed := errors.New("closed")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	closedCh := make(chan struct{})
	close(closedCh)
	for _, c := range []struct {
		name string
		ctx  context.Context
		done <-chan struct{}
		d    time.Duration
		want error
	}{
		{"passes", context.Background(), nil, time.Millisecond, nil},
		{"zero", context.Background(), nil, 0, nil},
		{"zero, ctx done", canceled, nil, 0, context.Canceled},
		{"ctx done", canceled, nil, time.Hour, context.Canceled},
		{"closed", context.Background(), closedCh, time.Hour, errClosed},
	} {
		if got := Sleep(c.ctx, c.done, errClosed, c.d); !errors.Is(got, c.want) {
			t.Errorf("%s: Sleep = %v, want %v", c.name, got, c.want)
		}
	}
}
