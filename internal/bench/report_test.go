package bench

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// syntheticStudy is a finished study result with three configurations:
// a baseline, one clearly slower, one within the noise.
func syntheticStudy(t *testing.T) *Result {
	t.Helper()
	st := &Study{
		Group: "forwarding", Title: "synthetic study", Method: DefaultMethod(),
		Configs: []StudyConfig{{Name: "kernel"}, {Name: "xdp"}, {Name: "flowtable", Unavailable: "CONFIG_NF_FLOW_TABLE not set"}},
		Cases:   []StudyCase{{Name: "udp-64B"}},
		Metrics: []MetricSpec{{Name: MetricGoodput, Unit: "Mbit/s", Primary: true}, {Name: MetricBusyCores, Unit: "CPUs"}},
	}
	r := newStudyResult("synthetic", st)
	r.Started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := r.series("forwarding", "udp-64B", "kernel", "", MetricGoodput, "Mbit/s", "")
	slow := r.series("forwarding", "udp-64B", "xdp", "", MetricGoodput, "Mbit/s", "")
	slow.Baseline = base.ID()
	for i, v := range seed003Baseline {
		base.AddWithLoad(v*10, 1.5)
		slow.AddWithLoad(v*8+float64(i%3), 1.5)
	}
	r.Unavailable = []UnavailableConfig{{Group: "forwarding", Config: "flowtable", Reason: "CONFIG_NF_FLOW_TABLE not set"}}
	r.Finalize()
	return r
}

func TestWriteReportFiles(t *testing.T) {
	r := syntheticStudy(t)
	dir := t.TempDir()
	path, err := WriteReport(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(html)
	for _, want := range []string{"<svg", "synthetic study", VerdictSlower, "not available on this kernel: CONFIG_NF_FLOW_TABLE not set", "rep", "0.8"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(s, "<svg"); n != 2 {
		t.Errorf("report has %d inline SVG figures, want 2 (box plot and repetitions of the one primary metric)", n)
	}
	if strings.Contains(s, "src=\"http") || strings.Contains(s, "<script") {
		t.Error("the report must be self-contained: no external resource, no script")
	}
	figs, _ := filepath.Glob(filepath.Join(dir, FileBase(r.Name, r.Started)+"-figures", "*"))
	if len(figs) != 4 {
		t.Fatalf("figure files %v, want 2 SVG + 2 PNG", figs)
	}
	for _, f := range figs {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 500 {
			t.Errorf("%s: %d bytes, err %v", f, len(b), err)
		}
		if strings.HasSuffix(f, ".png") {
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
	if _, err := WriteReport(dir, r); err == nil {
		t.Error("a second report of the same result overwrote the first")
	}
}

// TestReportRendersInChromium opens a report in headless Chromium and
// checks the screenshot: the box plots' fills (the palette colours of both
// configurations) must cover a visible area.
func TestReportRendersInChromium(t *testing.T) {
	browser := ""
	for _, b := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(b); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is missing: scripts/setup.sh installs it")
		}
		t.Skip("skipping: chromium is not installed (scripts/setup.sh installs it)")
	}
	dir := t.TempDir()
	path, err := WriteReport(dir, syntheticStudy(t))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1500,1400",
		"--screenshot="+shot, "file://"+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if n := pixelsNear(img, configColor(i)); n < 300 {
			t.Errorf("screenshot: %d pixels of configuration %d's colour %v, want a box plot's worth (>= 300)", n, i, configColor(i))
		}
	}
}

func pixelsNear(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near8(r, c.R) && near8(g, c.G) && near8(bl, c.B) {
				n++
			}
		}
	}
	return n
}

func near8(v uint32, want uint8) bool {
	d := int(v>>8) - int(want)
	return d >= -6 && d <= 6
}

// A result of `rttscope bench` (phases test_run, live, load: per-hook
// series, no study settings) gets a report too: its speed-like metrics
// are plotted per hook.
func TestReportOfPhaseResult(t *testing.T) {
	r, err := ReadResult("../../bench/results/rttscope-20261122T135536Z.json")
	if err != nil {
		t.Fatal(err)
	}
	path, err := WriteReport(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(path)
	if n := strings.Count(string(html), "<svg"); n < 4 {
		t.Errorf("%d figures in the report of a phase result", n)
	}
	for _, want := range []string{"rttscope/egress", "ns_per_packet", "load"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
