package mgmt

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/warren-mq/warren/definitions"
)

// The definitions endpoints: GET exports (?download=NAME makes it an
// attachment, as the console's download link asks), POST imports a JSON
// body or a multipart form's "file" field (the console's upload). An
// import is checked whole before anything is applied.
func (s *Server) registerDefinitions() {
	s.handle("GET", "/api/definitions", accessAdmin, func(q *request) error { return s.exportDefinitions(q, "") })
	s.handle("GET", "/api/definitions/{vhost}", accessAdmin, func(q *request) error {
		if !s.b.VHostExists(q.Var("vhost")) {
			return errNotFound()
		}
		return s.exportDefinitions(q, q.Var("vhost"))
	})
	s.handle("POST", "/api/definitions", accessAdmin, func(q *request) error { return s.importDefinitions(q, "") })
	s.handle("POST", "/api/definitions/{vhost}", accessAdmin, func(q *request) error {
		if !s.b.VHostExists(q.Var("vhost")) {
			return errNotFound()
		}
		return s.importDefinitions(q, q.Var("vhost"))
	})
}

func (s *Server) exportDefinitions(q *request, vhost string) error {
	d, err := definitions.Export(s.b, vhost)
	if err != nil {
		return err
	}
	if name := q.r.URL.Query().Get("download"); name != "" {
		q.w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(http.StatusOK)
	q.w.Write(b)
	return nil
}

func (s *Server) importDefinitions(q *request, vhost string) error {
	body, err := definitionsBody(q.r)
	if err != nil {
		return err
	}
	d, err := definitions.Parse(body)
	if err != nil {
		return errBadRequest(strings.TrimPrefix(err.Error(), "definitions: "))
	}
	if err := definitions.Import(s.b, d, vhost); err != nil {
		var ie *definitions.InvalidError
		if errors.As(err, &ie) {
			return errBadRequest(ie.Reason())
		}
		return &apiError{http.StatusInternalServerError, "internal_server_error", err.Error()}
	}
	return q.noContent(false)
}

// definitionsBody is the document: the request body, or the "file" part
// of a multipart form.
func definitionsBody(r *http.Request) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		if err := r.ParseMultipartForm(maxBody); err != nil {
			return nil, errBadRequest("multipart form: " + err.Error())
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			return nil, errBadRequest("multipart form without a file field")
		}
		defer f.Close()
		return readLimited(f)
	}
	return readLimited(r.Body)
}

func readLimited(rd io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(rd, maxBody+1))
	if err != nil {
		return nil, badRequestOr(err)
	}
	if len(b) > maxBody {
		return nil, &apiError{http.StatusRequestEntityTooLarge, "bad_request", "definitions larger than 64 MiB"}
	}
	return b, nil
}
