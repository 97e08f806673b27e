package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ModuleRoot is the directory holding go.mod, found by walking up from the
// working directory (a test's is its package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Tool finds a program the Makefile installs under .tools: the path in the
// environment variable env when it is set, else rel under ModuleRoot. The
// file must exist; the error starts with missing, which says how to install
// it.
func Tool(env, rel, missing string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s (%s=%s: %v)", missing, env, p, err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("%s (%v)", missing, err)
	}
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s (%v)", missing, err)
	}
	return p, nil
}
