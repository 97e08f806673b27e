// Package systemtest holds the tests of the gateway as a whole: the real
// handler that app.New builds, served on a loopback port and called over
// HTTP, by hand and with the official OpenAI and Anthropic SDKs (Go, and
// Node under the integration build tag), in front of fake upstreams, on the
// memory stores and on DynamoDB (dynalite, integration tag too). It has no
// code of its own: the package tests the others where they meet, which no
// single package's tests can.
package systemtest
