// Command httpservice serves the dlc platform over HTTP (package dlchttp) on the memory
// backend: go run ./examples/httpservice; curl -H 'X-Dlc-User: alice' localhost:8080/v1/clusters
package main

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/dlchttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", "localhost:8080")
	if err == nil {
		log.Printf("dlc on http://%s/v1/ (the API: /v1/openapi.json)", ln.Addr())
		err = serve(ctx, ln)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// serve serves a memory-backed client on ln until ctx is done.
func serve(ctx context.Context, ln net.Listener) error {
	c, err := dlc.New() // the memory backend; dlc.WithBackend(...) for Kubernetes
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := dlchttp.New(c, dlchttp.Options{Authenticator: dlchttp.InsecureHeaderAuthenticator{}}) // believes X-Dlc-User: development only
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	context.AfterFunc(ctx, func() { _ = srv.Close() }) // ends event streams too
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
