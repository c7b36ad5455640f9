package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// Ensure the daemon serves AMQP 1.0 on its AMQP port: go-amqp connects,
// an unroutable unsettled message is released, and the management API
// lists the connection with RabbitMQ's protocol name.
func TestRunAMQP10(t *testing.T) {
	cfg := defaults()
	cfg.DataDir = t.TempDir()
	cfg.StreamListen = ""
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.PrometheusListen = ""
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan readyAddrs, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	addrs := waitReady(t, ready, errc)

	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	c, err := goamqp.Dial(dctx, "amqp://"+addrs.AMQP.String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest")})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	s, err := c.NewSession(dctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := s.NewSender(dctx, "/exchanges/amq.fanout", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := snd.SendWithReceipt(dctx, goamqp.NewMessage([]byte("x")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(dctx); err != nil {
		t.Fatal(err)
	} else if _, ok := st.(*goamqp.StateReleased); !ok {
		t.Fatalf("state %#v, want released", st)
	}

	req, _ := http.NewRequest("GET", "http://"+addrs.HTTP.String()+"/api/connections", nil)
	req.SetBasicAuth("guest", "guest")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var conns []struct {
		Protocol string `json:"protocol"`
		User     string `json:"user"`
	}
	err = json.NewDecoder(res.Body).Decode(&conns)
	res.Body.Close()
	if err != nil || len(conns) != 1 || conns[0].Protocol != "AMQP 1-0" || conns[0].User != "guest" {
		t.Fatalf("/api/connections: %+v, %v", conns, err)
	}
}
