// Command referrers-registry is a test harness, never part of ocisource: an in-memory OCI
// registry that serves the distribution-spec v1.1 referrers API
// (GET /v2/<name>/referrers/<digest>), for tests/e2e_referrers.rs. It is
// go-containerregistry's pkg/registry with WithReferrersSupport(true), plus one
// correction: that registry reports a referrer's artifactType as its config media type
// only, while the spec says the manifest's own artifactType comes first (cosign v3 bundles
// carry artifactType application/vnd.dev.sigstore.bundle.v0.3+json over an empty config).
// The artifactType query filter stays unapplied (no OCI-Filters-Applied header), as the
// spec allows, so clients must filter themselves. Paging is not offered.
//
// Usage: referrers-registry [-addr 127.0.0.1:0]; prints "listening on HOST:PORT" once
// the socket is bound, logs requests to stderr, and runs until killed.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost" && host != "::1") {
		log.Fatalf("refusing to listen on %q: loopback addresses only", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	inner := registry.New(registry.WithReferrersSupport(true))
	fmt.Printf("listening on %s\n", ln.Addr())
	os.Stdout.Sync()
	log.Fatal(http.Serve(ln, fixArtifactTypes(inner)))
}

// fixArtifactTypes rewrites each descriptor of a referrers answer with the artifactType
// of the manifest it names, when that manifest has one.
func fixArtifactTypes(inner http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/")
		if r.Method != http.MethodGet || len(parts) < 5 || parts[len(parts)-2] != "referrers" {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		var index map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &index) != nil {
			copyResponse(w, rec, rec.Body.Bytes())
			return
		}
		repo := strings.Join(parts[2:len(parts)-2], "/")
		manifests, _ := index["manifests"].([]any)
		for _, m := range manifests {
			desc, ok := m.(map[string]any)
			if !ok {
				continue
			}
			digest, _ := desc["digest"].(string)
			get := httptest.NewRequest(http.MethodGet, "/v2/"+repo+"/manifests/"+digest, nil)
			mrec := httptest.NewRecorder()
			inner.ServeHTTP(mrec, get)
			var manifest struct {
				ArtifactType string `json:"artifactType"`
			}
			if mrec.Code == http.StatusOK && json.Unmarshal(mrec.Body.Bytes(), &manifest) == nil && manifest.ArtifactType != "" {
				desc["artifactType"] = manifest.ArtifactType
			}
		}
		body, err := json.Marshal(index)
		if err != nil {
			copyResponse(w, rec, rec.Body.Bytes())
			return
		}
		copyResponse(w, rec, body)
	})
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder, body []byte) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = bytes.NewReader(body).WriteTo(w)
}
