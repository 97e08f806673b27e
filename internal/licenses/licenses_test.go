package licenses

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/licenses.md (make licenses)")

const doc = "../../docs/licenses.md"

// TestDoc regenerates docs/licenses.md from the modules the binaries under
// functions/ link and fails when the file differs (`make licenses` rewrites
// it), or when a module's licence is unknown or not allowed.
func TestDoc(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mods, err := Linked(ctx, "../..", "./functions/...")
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) < 5 {
		t.Fatalf("%d modules linked; want the binaries' whole graph", len(mods))
	}
	for _, m := range mods {
		for _, l := range m.Licenses {
			if !Allowed[l] {
				t.Errorf("%s@%s: licence %s (files %v) is not allowed", m.Path, m.Version, l, m.Files)
			}
		}
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	std, _, err := Read(strings.TrimSpace(string(goroot)))
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(std, []string{"BSD-3-Clause"}) {
		t.Errorf("the Go standard library's licence: %v", std)
	}
	got := Markdown(std, mods)
	if *update {
		if err := os.WriteFile(doc, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("docs/licenses.md is out of date (make licenses rewrites it) (-file +generated):\n%s", cmp.Diff(string(want), string(got)))
	}
}

// TestClassify: each licence's full text, as Debian ships it where it
// does, is recognised as that licence alone; texts that only point at a
// licence, or carry one that is not allowed, are not recognised as an
// allowed one.
func TestClassify(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	const mit = `The MIT License (MIT)

Copyright (c) 2014 Someone

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.`
	const mit0 = `MIT No Attribution

Permission is hereby granted, free of charge, to any person obtaining a copy of this
software and associated documentation files (the "Software"), to deal in the Software
without restriction, including without limitation the rights to use, copy, modify,
merge, publish, distribute, sublicense, and/or sell copies of the Software, and to
permit persons to whom the Software is furnished to do so.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.`
	const bsd2 = `Copyright (c) 2013 Someone. All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

* Redistributions of source code must retain the above copyright notice, this
  list of conditions and the following disclaimer.
* Redistributions in binary form must reproduce the above copyright notice,
  this list of conditions and the following disclaimer in the documentation
  and/or other materials provided with the distribution.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"`
	const isc = `Copyright (c) 2015 Someone

Permission to use, copy, modify, and/or distribute this software for any
purpose with or without fee is hereby granted, provided that the above
copyright notice and this permission notice appear in all copies.

THE SOFTWARE IS PROVIDED "AS IS" AND THE AUTHOR DISCLAIMS ALL WARRANTIES`
	cases := []struct {
		name, text string
		want       []string
	}{
		{"Apache-2.0", read("/usr/share/common-licenses/Apache-2.0"), []string{"Apache-2.0"}},
		{"our LICENSE", read("../../LICENSE"), []string{"Apache-2.0"}},
		{"BSD-3-Clause", read("/usr/share/common-licenses/BSD"), []string{"BSD-3-Clause"}},
		{"MPL-2.0", read("/usr/share/common-licenses/MPL-2.0"), []string{"MPL-2.0"}},
		{"GPL-3", read("/usr/share/common-licenses/GPL-3"), []string{"GNU-GPL-family"}},
		{"LGPL-2.1", read("/usr/share/common-licenses/LGPL-2.1"), []string{"GNU-GPL-family"}},
		{"MIT", mit, []string{"MIT"}},
		{"MIT in Go comments", "// " + strings.ReplaceAll(mit, "\n", "\n// "), []string{"MIT"}},
		{"MIT-0", mit0, []string{"MIT-0"}},
		{"BSD-2-Clause", bsd2, []string{"BSD-2-Clause"}},
		{"ISC", isc, []string{"ISC"}},
		{"two licences", mit + "\n\n" + read("/usr/share/common-licenses/Apache-2.0"), []string{"Apache-2.0", "MIT"}},
		{"the Apache notice", `Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.`, []string{"Apache-2.0"}},
		{"a pointer, no text", "This project is made available under the terms of the Apache License, version 2.0. See LICENSE for details.", nil},
		{"MIT with the Commons Clause", "\"Commons Clause\" License Condition v1.0\n\n" + mit, []string{"MIT", "Commons-Clause"}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, Classify(c.text)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestReadUnknown: a module whose licence files hold no text this package
// knows, or that has none, is "unknown", which is not allowed.
func TestReadUnknown(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "LICENSE"), []byte("All rights reserved."), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, t.TempDir()} {
		got, _, err := Read(d)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(got, []string{"unknown"}) || Allowed[got[0]] {
			t.Errorf("%s: %v", d, got)
		}
	}
}
