package amqpbench

import (
	"fmt"
	"time"
)

// SmokeConfigs returns one small Config per scenario against url, count
// messages each: classic-1p1c with 16-byte bodies, quorum-1p1c with 1 KiB
// bodies, fanout to 3 queues over 2 consumer connections. Queue names start
// with "amqpbench-smoke". The CLI's -short mode and TestSmoke use them; a
// test that starts its own broker can run them with RunScenario and check
// each Result with CheckComplete (accepting ErrDeclare for quorum-1p1c
// where the broker has no quorum queues).
func SmokeConfigs(url string, count int) []Config {
	base := Config{
		URL:          url,
		Count:        count,
		Prefix:       "amqpbench-smoke",
		MaxInFlight:  100,
		Prefetch:     50,
		AckEvery:     10,
		SetupTimeout: 10 * time.Second,
		StallTimeout: 10 * time.Second,
	}
	classic := base
	classic.Scenario, classic.MessageSize = ScenarioClassic1p1c, 16
	quorum := base
	quorum.Scenario, quorum.MessageSize = ScenarioQuorum1p1c, 1024
	fanout := base
	fanout.Scenario, fanout.MessageSize, fanout.Queues, fanout.ConsumerConnections = ScenarioFanout, 16, 3, 2
	return []Config{classic, quorum, fanout}
}

// CheckComplete returns an error unless res shows published messages all
// confirmed, none nacked, each delivered once to each queue, and the rates
// and latencies filled in.
func CheckComplete(res Result, published int) error {
	switch {
	case res.Published != published || res.Confirmed != published || res.Nacked != 0:
		return fmt.Errorf("amqpbench: %s: published %d, confirmed %d, nacked %d; want %d, %d, 0",
			res.Scenario, res.Published, res.Confirmed, res.Nacked, published, published)
	case res.Delivered != published*res.Queues || res.Redelivered != 0:
		return fmt.Errorf("amqpbench: %s: delivered %d (%d redelivered), want %d × %d queues",
			res.Scenario, res.Delivered, res.Redelivered, published, res.Queues)
	case published > 0 && (res.PublishMsgsPerSec <= 0 || res.EndToEndMsgsPerSec <= 0 || res.ConsumeMsgsPerSec <= 0):
		return fmt.Errorf("amqpbench: %s: rates not filled in: %+v", res.Scenario, res)
	case published > 0 && res.MessageSize >= timestampSize && (res.LatencyP50 <= 0 || res.LatencyMax < res.LatencyP99 || res.ConfirmP50 <= 0):
		return fmt.Errorf("amqpbench: %s: latencies not filled in: %+v", res.Scenario, res)
	}
	return nil
}
