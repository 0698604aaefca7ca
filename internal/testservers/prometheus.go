package testservers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Prometheus is a Prometheus server scraping one target every second,
// with native histograms on.
type Prometheus struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	dir string
}

// StartPrometheus starts Debian's prometheus with a configuration of its
// own in the test's temporary directory, scraping target (HOST:PORT,
// path /metrics) every second, and waits until it is ready. It is killed at
// the end of the test.
func StartPrometheus(t testing.TB, target string) *Prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		missing(t, "no prometheus binary (Debian package prometheus)")
	}
	p := &Prometheus{dir: t.TempDir()}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	p.URL = "http://" + addr
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: rttscope
    static_configs:
      - targets: ['%s']
`, target)
	cfgPath := filepath.Join(p.dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(p.dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(p.dir, "data"),
		"--web.listen-address="+addr, "--enable-feature=native-histograms")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	// The limit only turns a server that never gets ready into a failure.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-done:
			t.Fatalf("prometheus exited at start:\n%s", p.Log())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready:\n%s", p.Log())
		}
	}
}

// Log returns the server's output so far.
func (p *Prometheus) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "prometheus.log"))
	return string(b)
}

// Sample is one element of an instant vector from the query API: a float
// value, or a native histogram.
type Sample struct {
	Metric    map[string]string
	Value     float64
	Histogram *Histogram
}

// Histogram is a native histogram as the query API returns it.
type Histogram struct {
	Count, Sum float64
	// Buckets are the non-empty buckets: lower and upper bound (seconds)
	// and count.
	Buckets []Bucket
}

// Bucket is one bucket of a native histogram.
type Bucket struct {
	Lower, Upper, Count float64
}

// Query runs an instant query now and returns the vector.
func (p *Prometheus) Query(ctx context.Context, q string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric    map[string]string
				Value     []any
				Histogram []json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %s: %w: %s", q, err, body)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: %s %s: %s", q, r.Status, r.Error, body)
	}
	var out []Sample
	for _, e := range r.Data.Result {
		s := Sample{Metric: e.Metric}
		switch {
		case len(e.Value) == 2:
			if s.Value, err = number(e.Value[1]); err != nil {
				return nil, err
			}
		case len(e.Histogram) == 2:
			if s.Histogram, err = decodeHistogram(e.Histogram[1]); err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeHistogram reads {"count": "N", "sum": "S", "buckets": [[rule,
// "lower", "upper", "count"], ...]}.
func decodeHistogram(raw json.RawMessage) (*Histogram, error) {
	var h struct {
		Count, Sum string
		Buckets    [][]any
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, err
	}
	var out Histogram
	var err error
	if out.Count, err = strconv.ParseFloat(h.Count, 64); err != nil {
		return nil, err
	}
	if out.Sum, err = strconv.ParseFloat(h.Sum, 64); err != nil {
		return nil, err
	}
	for _, b := range h.Buckets {
		if len(b) != 4 {
			return nil, fmt.Errorf("bucket %v", b)
		}
		var bk Bucket
		for i, p := range []*float64{&bk.Lower, &bk.Upper, &bk.Count} {
			if *p, err = number(b[i+1]); err != nil {
				return nil, err
			}
		}
		out.Buckets = append(out.Buckets, bk)
	}
	return &out, nil
}

// number reads the API's numbers, which are strings.
func number(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("not a string number: %v", v)
	}
	return strconv.ParseFloat(s, 64)
}

// TargetHealth returns the health and last error of each target, for
// failure messages.
func (p *Prometheus) TargetHealth() string {
	resp, err := http.Get(p.URL + "/api/v1/targets")
	if err != nil {
		return err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL, Health, LastError string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", r.Data.ActiveTargets)
}
