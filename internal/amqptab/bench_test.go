package amqptab

import "testing"

func BenchmarkReadTable(b *testing.B) {
	raw, _ := AppendTable(nil, Table{"x-message-ttl": int32(60000), "x-queue-type": "quorum", "x-dead-letter-exchange": "dlx"})
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ReadTable(raw); err != nil {
			b.Fatal(err)
		}
	}
}
