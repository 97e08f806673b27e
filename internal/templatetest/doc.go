// Package templatetest checks the deployment files against the code they
// deploy: template.yaml (the SAM template) against the Makefile, the DynamoDB
// store's key schema and calls (each function's policy against the calls its
// code makes: the gateway's stores, the sweep's Reconcile), the sweep's
// schedule and alarms, and the metric names the gateway and the sweep emit;
// deploy/config.yaml against the gateway's own config validation. It has no
// code of its own: its tests run in `go test ./...`.
package templatetest
