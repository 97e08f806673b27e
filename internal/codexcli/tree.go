package codexcli

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// killTree kills (SIGKILL) the process pid, its process group and every
// process below it with theirs. codex runs each of the agent's commands in
// a session of its own, out of reach of a signal to codex's group, so the
// tree is walked while codex, stopped first, still holds it together. A
// process that left the tree before (reparented to init) is not found.
func killTree(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGSTOP)
	for _, p := range descendants(pid) {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

type procEntry struct{ pid, ppid, pgid int }

// descendants lists the processes below root, from /proc (none where there
// is no /proc).
func descendants(root int) []procEntry {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procEntry{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []procEntry
	queue := []int{root}
	for len(queue) > 0 {
		next := children[queue[0]]
		queue = queue[1:]
		for _, c := range next {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// readStat reads pid's parent and process group from /proc/PID/stat:
// "pid (comm) state ppid pgrp …", where comm may hold spaces and ')'.
func readStat(pid int) (procEntry, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procEntry{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return procEntry{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, pgid: pgid}, true
}
