package main

import (
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkReplicatedPublish publishes persistent 1 KiB messages with
// confirms (a window of 200 in flight) over AMQP 0-9-1 to a quorum
// queue and to a stream: on a single node, on the leader of a three-node
// cluster (every node on this machine, each message held by a majority
// before its confirm), and through a node of that cluster that does not
// lead (which forwards to the leader: the proxy). Run with
// -benchtime=20000x or so; compare the setups' msgs/s within one run.
func BenchmarkReplicatedPublish(b *testing.B) {
	for _, setup := range []string{"single", "cluster3", "cluster3-proxied"} {
		for _, kind := range []string{"quorum", "stream"} {
			b.Run(setup+"/"+kind, func(b *testing.B) {
				var decl, pub *clusterNode
				if setup == "single" {
					decl = &clusterNode{name: "single", dir: b.TempDir()}
					decl.flags = strings.Join([]string{"-data-dir", decl.dir, "-amqp-listen", "127.0.0.1:0",
						"-http-listen", "127.0.0.1:0", "-prometheus-listen=", "-stream-listen="}, " ")
					decl.start(b)
					pub = decl
				} else {
					nodes := startStreamCluster(b)
					decl, pub = nodes[0], nodes[0] // n1 declares, so leads
					if setup == "cluster3-proxied" {
						pub = nodes[1]
					}
				}
				name := "bench-" + kind
				dconn, err := amqp091.Dial("amqp://guest:guest@" + decl.amqp + "/")
				if err != nil {
					b.Fatal(err)
				}
				defer dconn.Close()
				dch, err := dconn.Channel()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := dch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": kind}); err != nil {
					b.Fatal(err)
				}
				waitFor(b, pub.name+" to know the queue", 10*time.Second, func() bool {
					code, _ := pub.api(b, "GET", "/api/queues/%2F/"+name, "")
					return code == 200
				})
				conn, err := amqp091.Dial("amqp://guest:guest@" + pub.amqp + "/")
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				ch, err := conn.Channel()
				if err != nil {
					b.Fatal(err)
				}
				if err := ch.Confirm(false); err != nil {
					b.Fatal(err)
				}
				confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1024))
				body := make([]byte, 1024)
				const window = 200
				b.SetBytes(int64(len(body)))
				b.ResetTimer()
				start := time.Now()
				inflight := 0
				for i := 0; i < b.N; i++ {
					for inflight >= window {
						if c := <-confirms; !c.Ack {
							b.Fatalf("nack %d", c.DeliveryTag)
						}
						inflight--
					}
					if err := ch.Publish("", name, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: body}); err != nil {
						b.Fatal(err)
					}
					inflight++
				}
				for ; inflight > 0; inflight-- {
					if c := <-confirms; !c.Ack {
						b.Fatalf("nack %d", c.DeliveryTag)
					}
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			})
		}
	}
}
