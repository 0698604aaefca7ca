package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Figures of the HTML report, drawn with gonum/plot: a box plot of a
// metric per configuration and the per-repetition values in run order.

// palette colours the configurations (the baseline first), so that a
// configuration has the same colour in every figure.
var palette = []color.RGBA{
	{0x4c, 0x72, 0xb0, 0xff}, {0xdd, 0x84, 0x52, 0xff}, {0x55, 0xa8, 0x68, 0xff},
	{0xc4, 0x4e, 0x52, 0xff}, {0x81, 0x72, 0xb3, 0xff}, {0x93, 0x78, 0x60, 0xff},
	{0xda, 0x8b, 0xc3, 0xff}, {0x8c, 0x8c, 0x8c, 0xff}, {0xcc, 0xb9, 0x74, 0xff},
	{0x64, 0xb5, 0xcd, 0xff},
}

func configColor(i int) color.RGBA { return palette[i%len(palette)] }

// figureSize is the size of every figure.
const (
	figureWidth  = 7 * vg.Inch
	figureHeight = 3.6 * vg.Inch
)

// figure is one rendered plot.
type figure struct {
	Name string // file name without extension
	SVG  []byte
	PNG  []byte
}

// plotSeries is what a figure draws of one configuration.
type plotSeries struct {
	Config string
	Values []float64
}

// boxFigure draws one box per configuration.
func boxFigure(name, title, unit string, series []plotSeries) (figure, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	names := make([]string, 0, len(series))
	for i, s := range series {
		names = append(names, s.Config)
		if len(s.Values) == 0 {
			continue
		}
		b, err := plotter.NewBoxPlot(vg.Points(28), float64(i), plotter.Values(s.Values))
		if err != nil {
			return figure{}, err
		}
		b.FillColor = configColor(i)
		b.BoxStyle.Width = vg.Points(1)
		b.MedianStyle.Width = vg.Points(2)
		p.Add(b)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	if len(names) > 4 {
		p.X.Tick.Label.Rotation = math.Pi / 8
		p.X.Tick.Label.XAlign = draw.XRight
	}
	p.Add(plotter.NewGrid())
	padY(p, series)
	return render(p, name)
}

// seriesFigure draws each configuration's values against the repetition.
func seriesFigure(name, title, unit string, series []plotSeries) (figure, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "repetition"
	p.Y.Label.Text = unit
	p.Legend.Top = true
	for i, s := range series {
		if len(s.Values) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(s.Values))
		for j, v := range s.Values {
			pts[j] = plotter.XY{X: float64(j + 1), Y: v}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return figure{}, err
		}
		line.Color = configColor(i)
		line.Width = vg.Points(1.5)
		points.Color = configColor(i)
		points.Shape = draw.CircleGlyph{}
		points.Radius = vg.Points(2.5)
		p.Add(line, points)
		p.Legend.Add(s.Config, line, points)
	}
	p.Add(plotter.NewGrid())
	padY(p, series)
	return render(p, name)
}

// padY widens a flat y range (identical values) so the axis is readable.
func padY(p *plot.Plot, series []plotSeries) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.Values {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		return
	}
	if hi-lo < 1e-9*math.Max(1, math.Abs(hi)) {
		pad := math.Max(1, math.Abs(hi)*0.05)
		p.Y.Min, p.Y.Max = lo-pad, hi+pad
	}
}

func render(p *plot.Plot, name string) (figure, error) {
	f := figure{Name: name}
	for _, format := range []string{"svg", "png"} {
		wt, err := p.WriterTo(figureWidth, figureHeight, format)
		if err != nil {
			return figure{}, err
		}
		var b bytes.Buffer
		if _, err := wt.WriteTo(&b); err != nil {
			return figure{}, fmt.Errorf("render %s: %w", format, err)
		}
		if format == "svg" {
			f.SVG = b.Bytes()
		} else {
			f.PNG = b.Bytes()
		}
	}
	return f, nil
}

// inlineSVG strips the XML prolog so the SVG can sit inside HTML.
func inlineSVG(svg []byte) string {
	s := string(svg)
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return s
}

// fileSafe turns a series key into a file name part.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}
