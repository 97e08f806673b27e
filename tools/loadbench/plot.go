package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one line of the plot: latency (ms) at each rate.
type series struct {
	name  string
	color color.RGBA
	dash  bool
	x, y  []float64
}

// palette is the series' colors, from the Okabe-Ito set that readers with
// a color vision deficiency can tell apart.
var palette = []color.RGBA{
	{0, 114, 178, 255},   // direct: blue
	{213, 94, 0, 255},    // gateway: vermilion
	{0, 158, 115, 255},   // keyed: green
	{204, 121, 167, 255}, // replay: purple
}

// plotSeries is the plot's lines for one percentile: direct and gateway
// unkeyed, gateway keyed and replay, against the open-loop rates.
func (res *results) plotSeries(p float64) []series {
	type line struct {
		name string
		runs map[runKey]*summary
		k    kind
	}
	lines := []line{
		{"direct", res.direct, unkeyed},
		{"gateway", res.gateway, unkeyed},
		{"gateway keyed", res.gateway, keyed},
		{"gateway replay", res.gateway, replay},
	}
	var out []series
	for i, l := range lines {
		s := series{name: l.name, color: palette[i], dash: i == 3}
		for _, rate := range res.rates {
			if r := l.runs[runKey{l.k, rate}]; r != nil && r.ttlb.Count() > 0 {
				s.x = append(s.x, float64(rate))
				s.y = append(s.y, float64(r.ttlb.Percentile(p))/float64(time.Millisecond))
			}
		}
		if len(s.x) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// minMS is the least latency the log axis shows; a smaller one (0 ms from
// a coarse histogram) is drawn at it.
const minMS = 0.001

// logTicks returns the 1-2-5 ticks of a log scale spanning [lo, hi]: from
// the largest 1, 2 or 5 times a power of ten at or below lo to the smallest
// at or above hi (at least two).
func logTicks(lo, hi float64) []float64 {
	if lo <= 0 || hi < lo {
		return []float64{0.1, 1}
	}
	var ticks []float64
	for e := int(math.Floor(math.Log10(lo))); ; e++ {
		for _, m := range []float64{1, 2, 5} {
			// Dividing by an exact power of ten rounds once: 0.2, not
			// 0.20000000000000004.
			v := m * math.Pow10(e)
			if e < 0 {
				v = m / math.Pow10(-e)
			}
			if v <= lo {
				ticks = ticks[:0] // start from the last tick at or below lo
			}
			ticks = append(ticks, v)
			if v >= hi && len(ticks) >= 2 {
				return ticks
			}
		}
	}
}

// oneTwoFive labels a log axis at 1, 2 and 5 times each power of ten
// (plot.LogTicks labels only the powers of ten).
type oneTwoFive struct{}

func (oneTwoFive) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for _, v := range logTicks(lo, hi) {
		if v >= lo && v <= hi {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	return ts
}

// panel is one chart of ss: latency on a log scale against rate, from 0 to
// a little past xmax, and its legend.
func panel(title string, ss []series, xmax float64) (*plot.Plot, plot.Legend, error) {
	p, legend := plot.New(), plot.NewLegend()
	p.Title.Text = title
	p.X.Label.Text = "rate (requests/s)"
	p.Add(plotter.NewGrid())
	ymin, ymax := math.Inf(1), 0.0
	for _, s := range ss {
		xy := make(plotter.XYs, len(s.x))
		for i := range s.x {
			xy[i] = plotter.XY{X: s.x[i], Y: math.Max(s.y[i], minMS)}
		}
		ymin, ymax = math.Min(ymin, slices.Min(s.y)), math.Max(ymax, slices.Max(s.y))
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, legend, fmt.Errorf("%s: %w", s.name, err)
		}
		l.Color, l.Width = s.color, vg.Points(2)
		if s.dash {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		pts.Color, pts.Shape, pts.Radius = s.color, draw.BoxGlyph{}, vg.Points(3)
		p.Add(l, pts)
		legend.Add(s.name, l, pts)
	}
	// After Add, which widens the axes to the data: the axes start at 0
	// and at the 1-2-5 tick below the least latency.
	yt := logTicks(math.Max(ymin, minMS), math.Max(ymax, minMS))
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, oneTwoFive{}
	p.Y.Min, p.Y.Max = yt[0], yt[len(yt)-1]
	p.X.Min, p.X.Max = 0, xmax*1.05
	legend.Left = true
	return p, legend, nil
}

// drawLegend draws l in the top left corner of the data area dc, on a
// white box so that the lines under it do not cross its text. (The plot
// draws its own legend across the axes' margins, onto the tick labels.)
func drawLegend(l plot.Legend, dc draw.Canvas) {
	const inset = 10 * pixel
	size := l.Rectangle(dc).Size()
	box := vg.Rectangle{
		Min: vg.Point{X: dc.Min.X + inset, Y: dc.Max.Y - inset - size.Y},
		Max: vg.Point{X: dc.Min.X + inset + size.X, Y: dc.Max.Y - inset},
	}
	frame := vg.Rectangle{Min: box.Min.Sub(vg.Point{X: 4 * pixel, Y: 4 * pixel}), Max: box.Max.Add(vg.Point{X: 6 * pixel, Y: 4 * pixel})}
	dc.SetColor(color.White)
	dc.Fill(frame.Path())
	dc.SetColor(color.Gray{Y: 180})
	dc.SetLineWidth(pixel)
	dc.SetLineDash(nil, 0)
	dc.Stroke(frame.Path())
	l.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: box})
}

// The plot's size: 1200 x 520 pixels at 96 dots per inch.
const (
	plotDPI                = 96
	plotW, plotH           = 1200, 520
	pixel        vg.Length = vg.Inch / plotDPI
	yLabelW                = 24 * pixel
)

// plotPNG draws p50 and p99 latency against rate, side by side, under
// title.
func plotPNG(res *results, title string) ([]byte, error) {
	xmax := 0.0
	for _, r := range res.rates {
		xmax = math.Max(xmax, float64(r))
	}
	p50, p99 := res.plotSeries(50), res.plotSeries(99)
	if len(p50) == 0 {
		return nil, fmt.Errorf("nothing to plot")
	}
	// Liberation Sans, not the library's default Liberation Serif: set
	// before plot.New and plot.NewLegend, which copy it.
	plot.DefaultFont.Variant = "Sans"
	var (
		plots   []*plot.Plot
		legends []plot.Legend
	)
	for _, c := range []struct {
		title string
		ss    []series
	}{{"p50 latency (open loop)", p50}, {"p99 latency (open loop)", p99}} {
		p, l, err := panel(c.title, c.ss, xmax)
		if err != nil {
			return nil, err
		}
		plots, legends = append(plots, p), append(legends, l)
	}

	img := vgimg.NewWith(vgimg.UseWH(plotW*pixel, plotH*pixel), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	// The panels' title style: the library's default font, centred.
	dc.FillText(plots[0].Title.TextStyle, vg.Point{X: dc.Center().X, Y: dc.Max.Y - 8*pixel}, title)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadTop: 36 * pixel, PadBottom: 8 * pixel, PadLeft: 8 * pixel, PadRight: 16 * pixel, PadX: 32 * pixel}
	for i, c := range plot.Align([][]*plot.Plot{plots}, tiles, dc)[0] {
		// The y axis's label, drawn here: the plot centres it at the
		// arithmetic mean of the axis's range, near the top of a log axis,
		// and moves the whole chart down to fit it.
		pc := draw.Crop(c, yLabelW, 0, 0, 0)
		plots[i].Draw(pc)
		data := plots[i].DataCanvas(pc)
		ls := plots[i].Y.Label.TextStyle
		ls.Rotation, ls.XAlign, ls.YAlign = math.Pi/2, draw.XCenter, draw.YTop
		c.FillText(ls, vg.Point{X: c.Min.X, Y: data.Center().Y}, "latency (ms, log scale)")
		drawLegend(legends[i], data)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
