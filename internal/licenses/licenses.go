// Package licenses lists the modules that buzzgate's binaries link and the
// licence of each, read from the licence files in the module cache and
// recognised by the phrases each licence's text is made of. It writes
// docs/licenses.md, which its test keeps true (and which fails on a licence
// outside Allowed): `make licenses` rewrites the file.
package licenses

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Allowed are the licences a module linked into the binaries may have:
// permissive ones, and MPL-2.0, whose copyleft covers only its own files
// (used unmodified, they stay under it and the rest under ours).
var Allowed = map[string]bool{
	"Apache-2.0":   true,
	"MIT":          true,
	"MIT-0":        true,
	"BSD-2-Clause": true,
	"BSD-3-Clause": true,
	"ISC":          true,
	"MPL-2.0":      true,
}

// Module is one module linked into the binaries.
type Module struct {
	Path, Version, Dir string
	// Licenses are the licences its licence files hold, sorted; several
	// when parts of it are under each.
	Licenses []string
	// Files are its licence files, as named in its root.
	Files []string
}

// Linked returns the modules (the main module's excepted) that provide a
// package to the binaries matched by patterns, in the module rooted at dir,
// as built for Linux with and without the Lambda build's tag, sorted by
// path, with their licences.
func Linked(ctx context.Context, dir string, patterns ...string) ([]Module, error) {
	seen := map[string]Module{}
	for _, tags := range []string{"", "lambda.norpc"} {
		args := append([]string{"list", "-deps", "-tags", tags, "-f",
			"{{with .Module}}{{if not .Main}}{{with .Replace}}{{.Path}} {{.Version}} {{.Dir}}{{else}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}{{end}}"}, patterns...)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOFLAGS=-mod=readonly")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list: %w\n%s", err, stderr.Bytes())
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				continue
			}
			seen[f[0]] = Module{Path: f[0], Version: f[1], Dir: f[2]}
		}
	}
	mods := make([]Module, 0, len(seen))
	for _, m := range seen {
		var err error
		if m.Licenses, m.Files, err = Read(m.Dir); err != nil {
			return nil, fmt.Errorf("%s@%s: %w", m.Path, m.Version, err)
		}
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b Module) int { return strings.Compare(a.Path, b.Path) })
	return mods, nil
}

// licenseFile matches the names licence files go by in a module's root.
var licenseFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying)([-._].*)?$`)

// Read classifies the licence files in a module's root directory. A file
// that holds no licence text it knows (a summary pointing at the others)
// is left out when another file holds one; when none does, the module's
// licence is "unknown".
func Read(dir string) (licenses, files []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	found := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !licenseFile.MatchString(e.Name()) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, err
		}
		files = append(files, e.Name())
		for _, l := range Classify(string(text)) {
			found[l] = true
		}
	}
	if len(found) == 0 {
		found["unknown"] = true
	}
	for l := range found {
		licenses = append(licenses, l)
	}
	slices.Sort(licenses)
	return licenses, files, nil
}

// rule recognises one licence: its text holds every phrase of all and none
// of none.
type rule struct {
	id        string
	all, none []string
}

// rules hold phrases from each licence's own text (normalised: lower case,
// one space between words, no comment markers or punctuation but what the
// phrases show), specific enough that another licence does not hold them.
var rules = []rule{
	{id: "Apache-2.0", all: []string{"apache license", "version 2.0, january 2004", "terms and conditions for use, reproduction, and distribution", "grant of patent license"}},
	// The notice the Apache licence's appendix gives for files under it.
	{id: "Apache-2.0", all: []string{"licensed under the apache license, version 2.0 (the \"license\"); you may not use this file except in compliance with the license"}},
	{id: "MIT", all: []string{"permission is hereby granted, free of charge, to any person obtaining a copy", "the above copyright notice and this permission notice shall be included in all copies or substantial portions of the software"}},
	{id: "MIT-0", all: []string{"permission is hereby granted, free of charge, to any person obtaining a copy", "to permit persons to whom the software is furnished to do so."}, none: []string{"shall be included in all copies"}},
	{id: "BSD-3-Clause", all: []string{"redistribution and use in source and binary forms, with or without modification, are permitted provided that the following conditions are met", "redistributions of source code must retain the above copyright notice", "may be used to endorse or promote products derived from this software without specific prior written permission"}},
	{id: "BSD-2-Clause", all: []string{"redistribution and use in source and binary forms, with or without modification, are permitted provided that the following conditions are met", "redistributions of source code must retain the above copyright notice", "redistributions in binary form must reproduce the above copyright notice"}, none: []string{"endorse or promote products derived"}},
	{id: "ISC", all: []string{"permission to use, copy, modify, and", "distribute this software for any purpose with or without fee is hereby granted, provided that the above copyright notice and this permission notice appear in all copies"}},
	{id: "MPL-2.0", all: []string{"mozilla public license", "version 2.0", "\"source code form\" means the form of the work preferred for making modifications"}},
	// Licences that are not allowed, named so that the list says what
	// it found.
	// GPL, LGPL or AGPL (their texts name each other; MPL-2.0 names them
	// as its "Secondary Licenses").
	{id: "GNU-GPL-family", all: []string{"gnu", "general public license"}, none: []string{"mozilla public license"}},
	{id: "SSPL", all: []string{"server side public license"}},
	{id: "BUSL", all: []string{"business source license"}},
	{id: "Commons-Clause", all: []string{"commons clause"}},
}

var (
	commentMarks = regexp.MustCompile(`(?m)^\s*(//|#+|\*|;)`)
	spaces       = regexp.MustCompile(`\s+`)
)

func normalise(text string) string {
	text = commentMarks.ReplaceAllString(text, " ")
	text = strings.NewReplacer("“", `"`, "”", `"`, "’", "'", "‘", "'").Replace(text)
	return strings.TrimSpace(spaces.ReplaceAllString(strings.ToLower(text), " "))
}

// Classify returns the licences whose text text holds, in rules' order.
func Classify(text string) []string {
	t := normalise(text)
	var ids []string
	for _, r := range rules {
		if containsAll(t, r.all) && !containsAny(t, r.none) && !slices.Contains(ids, r.id) {
			ids = append(ids, r.id)
		}
	}
	return ids
}

func containsAll(t string, phrases []string) bool {
	for _, p := range phrases {
		if !strings.Contains(t, p) {
			return false
		}
	}
	return true
}

func containsAny(t string, phrases []string) bool {
	for _, p := range phrases {
		if strings.Contains(t, p) {
			return true
		}
	}
	return false
}

// Markdown renders docs/licenses.md: std is the Go standard library's
// licences (the toolchain's LICENSE), mods the linked modules.
func Markdown(std []string, mods []Module) []byte {
	var b bytes.Buffer
	b.WriteString(`# Licences

buzzgate is licensed under the Apache License, Version 2.0 ([LICENSE](../LICENSE)).

The modules its binaries (` + "`functions/...`" + `, as built for Linux, for Lambda or not) link, and
the licence of each, as read from the licence files in the module cache. Generated by
` + "`make licenses`" + ` (internal/licenses); its test fails when this list is out of date or names a
licence that is not one of: ` + strings.Join(sortedKeys(Allowed), ", ") + `.

Several licences joined by AND: parts of the module are under each.

| Module | Version | Licence | Files |
| --- | --- | --- | --- |
`)
	fmt.Fprintf(&b, "| Go standard library | the toolchain's | %s | LICENSE |\n", strings.Join(std, " AND "))
	for _, m := range mods {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", m.Path, m.Version, strings.Join(m.Licenses, " AND "), strings.Join(m.Files, ", "))
	}
	b.WriteString(`
The container image adds what is not Go code: the tokenizer's vocabularies (o200k_base and
cl100k_base from the tiktoken npm package, MIT) and CA certificates. ` + "`make image`" + ` copies the
build machine's (on Debian, the ca-certificates package: the Mozilla CA list, MPL-2.0); the
` + "`Dockerfile`" + `'s base, gcr.io/distroless/static-debian12, brings Debian's, with the few other
Debian packages it is made of, each under its own licence.
`)
	return b.Bytes()
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
