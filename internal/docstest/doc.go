// Package docstest holds the checks that keep what docs/ says about the
// code true of the code, where no single package is the natural home: the
// package graph of docs/architecture.md against the real imports, and the
// tests and benchmarks the docs name against the test files. It has no
// code of its own.
package docstest
