package nodenet

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
)

// Ensure a forgotten peer's link goes down and stays down (n1 no longer
// dials it), that Send and Dial to it fail, that it drops out of Peers,
// and that its handshakes, a link to a lower-named node or a lane
// connection, are refused with the reason logged on both sides.
func TestForget(t *testing.T) {
	c := newCluster(t, nil, "n1", "n2", "n3")
	c.connected()
	for _, nd := range c.nodes {
		nd.net.HandleConn(LaneStream, func(_ string, conn net.Conn) { conn.Close() })
	}
	n1, n3 := c.nodes["n1"], c.nodes["n3"]
	if err := n1.net.Forget("n3"); err != nil {
		t.Fatal(err)
	}
	if err := n1.net.Forget("n3"); err != nil {
		t.Fatalf("forgetting twice: %v", err)
	}
	if err := n1.net.Forget("n9"); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("forgetting an unknown node: %v, want ErrUnknownPeer", err)
	}
	if e := n1.nextEvent(t); e != "-n3" {
		t.Fatalf("n1's event after forgetting n3: %q, want -n3", e)
	}
	if got := n1.net.Peers(); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("n1's peers %v, want [n2]", got)
	}
	if err := n1.net.Send("n3", LaneRaft, seq(1)); !errors.Is(err, ErrForgotten) {
		t.Fatalf("Send to a forgotten peer: %v, want ErrForgotten", err)
	}
	if _, err := n1.net.Dial(context.Background(), "n3", LaneStream); !errors.Is(err, ErrForgotten) {
		t.Fatalf("Dial of a forgotten peer: %v, want ErrForgotten", err)
	}
	if _, ok := n1.net.PeerStats("n3"); ok {
		t.Fatal("PeerStats of a forgotten peer")
	}
	// n3 sees n1 go; nothing brings the link back.
	if e := n3.nextEvent(t); e != "-n1" {
		t.Fatalf("n3's event after n1 forgot it: %q, want -n1", e)
	}
	_, err := n3.net.Dial(context.Background(), "n1", LaneStream)
	if !errors.Is(err, ErrForgotten) || !strings.Contains(err.Error(), "forget_cluster_node") {
		t.Fatalf("n3 dialing n1: %v, want ErrForgotten naming forget_cluster_node", err)
	}
	waitLog(t, n1.log, "refused connection", "from=n3", "forgotten")
	// The link dialed by the lower-named node: forget n1 on n2.
	n2 := c.nodes["n2"]
	if err := n2.net.Forget("n1"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, n1.log, "link down", "peer=n2", "forgotten")
	if st, _ := n2.net.PeerStats("n3"); !st.Reachable {
		t.Fatal("n2 lost n3, which it did not forget")
	}
}
