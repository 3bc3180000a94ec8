package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// promServer is a real Prometheus scraping one target every second, on a
// free loopback port with its own config and data directory under dir.
type promServer struct {
	api string
	log *strings.Builder
}

// startPrometheus starts Debian's Prometheus scraping target (host:port)
// with the extra flags; it is stopped at the test's end.
func startPrometheus(t *testing.T, dir, target string, flags ...string) *promServer {
	t.Helper()
	prom := prometheusBinary(t, "prometheus")
	port := freePort(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: probectl
    static_configs:
      - targets: [%q]
`, target)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn"}, flags...)
	pcmd := exec.Command(prom, args...)
	p := &promServer{api: fmt.Sprintf("http://127.0.0.1:%d", port), log: &strings.Builder{}}
	pcmd.Stdout, pcmd.Stderr = p.log, p.log
	if err := pcmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pcmd.Process.Signal(os.Interrupt); pcmd.Wait() })
	return p
}

// promSample is one sample of an instant query's vector.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query.
func (p *promServer) query(q string) ([]promSample, error) {
	resp, err := http.Get(p.api + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", q, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, r.Error)
	}
	out := make([]promSample, 0, len(r.Data.Result))
	for _, s := range r.Data.Result {
		text, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v: %v", q, s.Value[1], err)
		}
		out = append(out, promSample{Metric: s.Metric, Value: v})
	}
	return out, nil
}

// waitSeries polls q until it returns a sample, within 90 seconds.
func (p *promServer) waitSeries(t *testing.T, q string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := p.query(q)
		if err == nil && len(got) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no sample within 90s (last: %v %v)\nprometheus:\n%s", q, got, err, p.log.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// workspaceCLI runs probectl in the workspace ws of the state directory
// state, in this process, failing the test on a non-zero exit; it returns
// the output.
func workspaceCLI(t *testing.T, state, ws string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		var out strings.Builder
		if code := run(append([]string{"-state-dir", state, "-workspace", ws}, args...), &out, &out); code != 0 {
			t.Fatalf("probectl %v: exit %d\n%s", args, code, out.String())
		}
		return out.String()
	}
}
