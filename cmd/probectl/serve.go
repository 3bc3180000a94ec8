package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
)

// defaultListen is serve's address: loopback only, on a port of its own.
const defaultListen = "127.0.0.1:9479"

func newServeCmd(g *globals) *cobra.Command {
	var listen string
	var maxSeries int
	var events *eventsOutFlags
	cmd := &cobra.Command{
		Use:   "serve [-listen ADDR] [-max-series N] [-events-out PATH|-]",
		Short: "Serve what the applied probes measure as Prometheus metrics",
		Long: `Serve answers GET /metrics with every probe applied in the workspace, read
from the pinned maps at each scrape (README, "Serve: Prometheus metrics").
It runs until SIGINT or SIGTERM; the probes stay applied. With
-events-out it also writes the workspace's events as NDJSON, following the
event buffer through applies and destroys.

  -listen ADDR    where to listen (default ` + defaultListen + `: loopback only;
                  port 0 picks one, printed at start)
  -max-series N   the most aggregation series one scrape returns; the rest
                  are counted in probectl_scrape_series_cut
` + eventsOutHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxSeries < 1 {
				return fmt.Errorf("-max-series %d: it must be at least 1", maxSeries)
			}
			if _, err := events.check(); err != nil {
				return err
			}
			// The workspace name is checked now, not at the first scrape.
			w, err := runtime.Open(g.stateDir, g.workspace)
			if err != nil {
				return err
			}
			w.Close()
			if err := requireBPF("serve"); err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.Handle("/metrics", metricsHandler(g.stateDir, g.workspace, maxSeries))
			mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/" {
					http.NotFound(rw, r)
					return
				}
				fmt.Fprintf(rw, "probectl serve: workspace %q; metrics at /metrics\n", g.workspace)
			})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("-listen %s: %w", listen, err)
			}
			ln = limitConns(ln, maxConns)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			sink, err := startEventSink(ctx, g, events, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				ln.Close()
				return err
			}
			srv := newHTTPServer(mux)
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			// With the events on stdout, stdout carries nothing else.
			say := cmd.OutOrStdout()
			if events.out == "-" {
				say = cmd.ErrOrStderr()
			}
			fmt.Fprintf(say, "Serving workspace %q at http://%s/metrics\n", g.workspace, ln.Addr())
			var serr error
			select {
			case serr = <-done:
			case <-sink.Done():
			case <-ctx.Done():
			}
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) && serr == nil {
				serr = err
			}
			if err := sink.Stop(); err != nil && serr == nil {
				serr = err
			}
			if errors.Is(serr, http.ErrServerClosed) {
				serr = nil
			}
			return serr
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultListen, "the address to listen on")
	cmd.Flags().IntVar(&maxSeries, "max-series", metrics.DefaultMaxSeries, "the most aggregation series one scrape returns")
	events = addEventsOutFlags(cmd)
	return cmd
}

// metricsHandler serves the workspace's metrics, probectl's own process
// and Go runtime metrics, and extra (the agent's).
func metricsHandler(stateDir, workspace string, maxSeries int, extra ...prometheus.Collector) http.Handler {
	return registryHandler(append(extra, &metrics.Collector{StateDir: stateDir, Workspace: workspace, MaxSeries: maxSeries})...)
}

// registryHandler serves cs and probectl's own process and Go runtime
// metrics (the node agent's collectors are its ProbeSets').
func registryHandler(cs ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	reg.MustRegister(cs...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}

// maxConns bounds the HTTP connections serve and the agent hold open at
// once: the port is open to every local user, and each connection is a
// file descriptor of a root process that needs its own to apply (state
// files, pins, BPF objects). More wait in the kernel's accept queue.
const maxConns = 64

// newHTTPServer is serve's and the agent's server. Every phase of a
// connection has a deadline: a keep-alive connection left idle is closed
// after IdleTimeout (without one, Go's server waits for the next request
// for ever, and a local user holds as many as it likes).
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute, // past it a handler's context ends: as long as WriteTimeout
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// limitConns makes ln accept at most n connections open at once.
func limitConns(ln net.Listener, n int) net.Listener {
	return &connLimit{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type connLimit struct {
	net.Listener
	slots chan struct{}
	once  sync.Once
	done  chan struct{}
}

func (l *connLimit) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
