package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
)

// The suites' broker: Warren in this process, with its defaults, on the
// ports the suites expect (AMQP 5672, stream 5552 advertised as
// localhost:5552; every address, IPv6 too, as the daemon's defaults),
// inside the private network namespace main set up.
//
// The stream client's suite creates and deletes a virtual host through
// RabbitMQ's management HTTP API (PUT and DELETE /api/vhosts/<name> on
// port 15672) before and after its specs. Until Warren has that API, this
// harness answers those two requests itself, on the broker it runs, with
// RabbitMQ's status codes; every other path is 404, so the tests that
// need more of the API fail and are excluded (exclusions.txt).

type suiteBroker struct {
	b       *queues.Broker
	servers []interface{ Close() error }
	http    *http.Server
	dir     string
}

func startBroker(logger *slog.Logger) (*suiteBroker, error) {
	dir, err := os.MkdirTemp("", "warren-peer-suites-")
	if err != nil {
		return nil, err
	}
	b, err := queues.Open(dir, queues.Options{Logger: logger})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sb := &suiteBroker{b: b, dir: dir}
	listen := func(addr string) (net.Listener, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			sb.close()
		}
		return ln, err
	}
	ln, err := listen(":5672")
	if err != nil {
		return nil, err
	}
	as := amqp.NewServer(amqp.Config{Broker: b, Logger: logger})
	sb.servers = append(sb.servers, as)
	go as.Serve(ln)

	ln, err = listen(":5552")
	if err != nil {
		return nil, err
	}
	ss, err := streamproto.NewServer(streamproto.Config{Broker: b, Logger: logger, Advertise: "localhost:5552"})
	if err != nil {
		ln.Close()
		sb.close()
		return nil, err
	}
	sb.servers = append(sb.servers, ss)
	go ss.Serve(ln)

	ln, err = listen(":15672")
	if err != nil {
		return nil, err
	}
	sb.http = &http.Server{Handler: http.HandlerFunc(sb.serveVHosts)}
	go sb.http.Serve(ln)
	return sb, nil
}

// serveVHosts answers PUT and DELETE /api/vhosts/<name> as RabbitMQ's
// management API does for the default user: 201 Created (204 when it
// existed) with full permissions for the caller, 204 No Content on
// delete, 404 for an unknown vhost.
func (sb *suiteBroker) serveVHosts(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	remote, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if _, err := sb.b.Authenticate(user, pass, remote); !ok || err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
		http.Error(w, `{"error":"not_authorised","reason":"Login failed"}`, http.StatusUnauthorized)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/api/vhosts/")
	if !ok || name == "" || strings.Contains(name, "/") {
		http.Error(w, `{"error":"Object Not Found","reason":"Not Found"}`, http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodPut:
		if sb.b.VHostExists(name) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err := sb.b.AddVHost(name); err != nil {
			http.Error(w, fmt.Sprintf(`{"error":"bad_request","reason":%q}`, err.Error()), http.StatusBadRequest)
			return
		}
		if err := sb.b.SetPermissions(user, name, queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
			http.Error(w, fmt.Sprintf(`{"error":"bad_request","reason":%q}`, err.Error()), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		err := sb.b.DeleteVHost(name)
		switch {
		case errors.Is(err, queues.ErrNotFound):
			http.Error(w, `{"error":"Object Not Found","reason":"Not Found"}`, http.StatusNotFound)
		case err != nil:
			http.Error(w, fmt.Sprintf(`{"error":"bad_request","reason":%q}`, err.Error()), http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		w.Header().Set("Allow", "PUT, DELETE")
		http.Error(w, `{"error":"Method Not Allowed","reason":"Method Not Allowed"}`, http.StatusMethodNotAllowed)
	}
}

func (sb *suiteBroker) close() {
	if sb.http != nil {
		sb.http.Shutdown(context.Background())
	}
	for _, s := range sb.servers {
		s.Close()
	}
	sb.b.Close()
	os.RemoveAll(sb.dir)
}
