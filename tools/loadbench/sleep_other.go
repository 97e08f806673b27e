//go:build !linux

package main

import "time"

func precisePacer() (done func()) { return func() {} }

func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
