package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"slices"
	"strconv"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// series is one line of the plot: latency (ms) at each rate.
type series struct {
	name  string
	color color.RGBA
	dash  bool
	x, y  []float64
}

var (
	white    = color.RGBA{255, 255, 255, 255}
	black    = color.RGBA{0, 0, 0, 255}
	gridGray = color.RGBA{225, 225, 225, 255}
	palette  = []color.RGBA{
		{0, 114, 178, 255},   // direct: blue
		{213, 94, 0, 255},    // gateway: vermilion
		{0, 158, 115, 255},   // keyed: green
		{204, 121, 167, 255}, // replay: purple
	}
)

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

// logTicks returns the 1-2-5 ticks of a log scale spanning [lo, hi]: from
// the largest 1, 2 or 5 times a power of ten at or below lo to the smallest
// at or above hi (at least two).
func logTicks(lo, hi float64) []float64 {
	if lo <= 0 || hi < lo {
		return []float64{0.1, 1}
	}
	var ticks []float64
	for e := math.Floor(math.Log10(lo)); ; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := round6(m * math.Pow(10, e))
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

// round6 rounds away floating-point noise (0.30000000000000004).
func round6(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return r
}

// niceTicks returns tick values from 0 to at least hi, about n of them, at
// a step of 1, 2 or 5 times a power of ten.
func niceTicks(hi float64, n int) []float64 {
	if hi <= 0 || n < 1 {
		return []float64{0, 1}
	}
	raw := hi / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow * 10
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	var ticks []float64
	for i := 0; ; i++ {
		v := round6(float64(i) * step)
		ticks = append(ticks, v)
		if v >= hi-step*1e-9 {
			return ticks
		}
	}
}

func tickLabel(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	return trimDot(s)
}

func trimDot(s string) string {
	if s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}

type canvas struct{ img *image.RGBA }

func (c canvas) text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return 7 * len(s) }

func (c canvas) rect(x0, y0, x1, y1 int, col color.Color) {
	draw.Draw(c.img, image.Rect(x0, y0, x1, y1), image.NewUniform(col), image.Point{}, draw.Src)
}

// line draws from (x0,y0) to (x1,y1), w pixels wide; dashed lines skip
// every other 8 pixels.
func (c canvas) line(x0, y0, x1, y1 float64, w int, col color.Color, dash bool) {
	n := int(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))) + 1
	for i := 0; i <= n; i++ {
		if dash && (i/8)%2 == 1 {
			continue
		}
		t := float64(i) / float64(n)
		x, y := int(math.Round(x0+t*(x1-x0))), int(math.Round(y0+t*(y1-y0)))
		c.rect(x-w/2, y-w/2, x-w/2+w, y-w/2+w, col)
	}
}

// panel draws one chart of ss into r.
func (c canvas) panel(r image.Rectangle, title string, ss []series, xmax float64) {
	left, right, top, bottom := r.Min.X+60, r.Max.X-15, r.Min.Y+30, r.Max.Y-45
	ymin, ymax := math.Inf(1), 0.0
	for _, s := range ss {
		ymin, ymax = math.Min(ymin, slices.Min(s.y)), math.Max(ymax, slices.Max(s.y))
	}
	yt := logTicks(math.Max(ymin, 0.001), math.Max(ymax, 0.001))
	xt := niceTicks(xmax*1.05, 5)
	ybot, ytop, xtop := math.Log10(yt[0]), math.Log10(yt[len(yt)-1]), xt[len(xt)-1]
	px := func(x float64) float64 { return float64(left) + x/xtop*float64(right-left) }
	py := func(y float64) float64 {
		return float64(bottom) - (math.Log10(math.Max(y, 1e-6))-ybot)/(ytop-ybot)*float64(bottom-top)
	}
	for _, v := range yt {
		y := int(py(v))
		c.rect(left, y, right, y+1, gridGray)
		l := tickLabel(v)
		c.text(left-6-textWidth(l), y+4, l, black)
	}
	for _, v := range xt {
		x := int(px(v))
		c.rect(x, top, x+1, bottom, gridGray)
		l := tickLabel(v)
		c.text(x-textWidth(l)/2, bottom+16, l, black)
	}
	c.rect(left, top, left+1, bottom+1, black)
	c.rect(left, bottom, right, bottom+1, black)
	c.text(left+(right-left-textWidth(title))/2, r.Min.Y+18, title, black)
	xl := "rate (requests/s)"
	c.text(left+(right-left-textWidth(xl))/2, bottom+34, xl, black)
	c.text(r.Min.X+4, top-8, "ms (log)", black)
	for _, s := range ss {
		for i := range s.x {
			x, y := px(s.x[i]), py(s.y[i])
			if i > 0 {
				c.line(px(s.x[i-1]), py(s.y[i-1]), x, y, 2, s.color, s.dash)
			}
			c.rect(int(x)-3, int(y)-3, int(x)+4, int(y)+4, s.color)
		}
	}
	// The legend, top left inside the axes.
	for i, s := range ss {
		y := top + 12 + 16*i
		c.rect(left+10, y-5, left+30, y-3, s.color)
		c.text(left+36, y, s.name, black)
	}
}

// plotPNG draws p50 and p99 latency against rate, side by side.
func plotPNG(res *results, title string) ([]byte, error) {
	const w, h = 1200, 520
	c := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	c.rect(0, 0, w, h, white)
	c.text((w-textWidth(title))/2, 20, title, black)
	xmax := 0.0
	for _, r := range res.rates {
		xmax = math.Max(xmax, float64(r))
	}
	p50, p99 := res.plotSeries(50), res.plotSeries(99)
	if len(p50) == 0 {
		return nil, fmt.Errorf("nothing to plot")
	}
	c.panel(image.Rect(0, 30, w/2, h), "p50 latency (open loop)", p50, xmax)
	c.panel(image.Rect(w/2, 30, w, h), "p99 latency (open loop)", p99, xmax)
	var buf bytes.Buffer
	if err := png.Encode(&buf, c.img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
