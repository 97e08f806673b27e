//go:build integration && unix

package tokenize

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time the process has used, which on a shared machine
// moves far less than the time a benchmark takes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since since (the garbage
// collector's included), as cpu-ns/op.
func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(cpuTime()-since)/float64(b.N), "cpu-ns/op")
}

// BenchmarkCountWorstCase: 100 KiB that is one piece, or long runs of one
// class, in each alphabet, counted by the gateway's encoder (o200k_base).
func BenchmarkCountWorstCase(b *testing.B) {
	e := loadEncoders(b)[O200K].enc
	for _, a := range alphabets {
		text := a.make(rand.New(rand.NewPCG(1, 2)), 100<<10)
		b.Run(a.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu := cpuTime()
			for b.Loop() {
				e.count(text)
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkLibraryWorstCase is the same texts counted by
// github.com/pkoukk/tiktoken-go, at 16 and 64 KiB: four times the text
// takes about sixteen times as long, which is why the gateway merges
// pieces itself.
func BenchmarkLibraryWorstCase(b *testing.B) {
	lib := loadEncoders(b)[O200K].lib
	for _, a := range alphabets {
		for _, n := range []int{16 << 10, 64 << 10} {
			text := a.make(rand.New(rand.NewPCG(1, 2)), n)
			b.Run(fmt.Sprintf("%s/%dKiB", a.name, n>>10), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				cpu := cpuTime()
				for b.Loop() {
					lib.EncodeOrdinary(text)
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// BenchmarkCountOrdinary compares the encoder with the library on
// ordinary English text.
func BenchmarkCountOrdinary(b *testing.B) {
	e := loadEncoders(b)[O200K]
	text := strings.Repeat("The gateway bills a dropped stream from a real token count. ", 1000)
	b.Run("encoder", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		cpu := cpuTime()
		for b.Loop() {
			e.enc.count(text)
		}
		reportCPU(b, cpu)
	})
	b.Run("library", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		cpu := cpuTime()
		for b.Loop() {
			e.lib.EncodeOrdinary(text)
		}
		reportCPU(b, cpu)
	})
}

// BenchmarkCountRequestWorstCase is the most the gateway counts for one
// request when no usage comes: a prompt of 4 MiB (server.max_body_bytes'
// default) and an answer of 1 MiB, each one word of random letters, of
// which MergeLimit bytes each are merged.
func BenchmarkCountRequestWorstCase(b *testing.B) {
	c := New(vocabDir(b), nil)
	text := alphabets[0].make(rand.New(rand.NewPCG(1, 2)), 4<<20)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + text + `"}]}`)
	answer := text[:1<<20]
	c.Count("gpt-4o", "warm")
	cpu := cpuTime()
	for b.Loop() {
		c.Prompt("gpt-4o", body)
		c.Count("gpt-4o", answer)
	}
	reportCPU(b, cpu)
}
