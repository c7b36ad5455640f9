package alarm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
)

// ResidentMemory returns the process's resident set size: the pages of
// memory it holds, what the kernel's OOM killer and a cgroup's limit
// count (page cache aside, which the kernel reclaims first). It reads
// /proc/self/statm, as RabbitMQ's default rss strategy does on Linux;
// elsewhere it falls back to what the Go runtime has mapped and not
// returned to the OS.
//
// The Go runtime's own figures would miss memory it has freed but not
// yet returned (the scavenger returns it over minutes) and anything not
// allocated by Go; RSS is what can get the process killed.
func ResidentMemory() (uint64, error) {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return pages * uint64(os.Getpagesize()), nil
			}
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, errors.New("alarm: no memory reading on this platform")
	}
	return s[0].Value.Uint64() - s[1].Value.Uint64(), nil
}

// TotalMemory returns the memory the process may use: the machine's
// (/proc/meminfo's MemTotal), or its cgroup's limit when that is lower
// (cgroup v2 memory.max of its cgroup and their parents, v1
// memory.limit_in_bytes), so a broker in a container gets a watermark
// below the container's limit. RabbitMQ reads the machine's only (its
// total_memory_available_override_value is the container workaround).
func TotalMemory() (uint64, error) {
	return totalMemory("/proc", "/sys/fs/cgroup")
}

// totalMemory is TotalMemory with the roots of /proc and the cgroup file
// system given (for tests).
func totalMemory(proc, cgroupRoot string) (uint64, error) {
	total, err := memTotal(filepath.Join(proc, "meminfo"))
	if err != nil {
		return 0, err
	}
	if limit, ok := cgroupLimit(filepath.Join(proc, "self", "cgroup"), cgroupRoot); ok && limit < total {
		return limit, nil
	}
	return total, nil
}

// memTotal reads MemTotal from a meminfo file.
func memTotal(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("alarm: total memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			break
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n *= 1024
		}
		return n, nil
	}
	return 0, fmt.Errorf("alarm: total memory: no MemTotal in %s", path)
}

// cgroupLimit returns the lowest memory limit on the process's cgroups
// (and their ancestors), if any is set.
func cgroupLimit(selfCgroup, root string) (uint64, bool) {
	data, err := os.ReadFile(selfCgroup)
	if err != nil {
		return 0, false
	}
	best, found := uint64(0), false
	consider := func(path, file string) {
		b, err := os.ReadFile(filepath.Join(path, file))
		if err != nil {
			return
		}
		v := string(bytes.TrimSpace(b))
		if v == "max" {
			return
		}
		n, err := strconv.ParseUint(v, 10, 64)
		// v1 writes "no limit" as a huge page-aligned number.
		if err != nil || n >= 1<<62 {
			return
		}
		if !found || n < best {
			best, found = n, true
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], filepath.Clean("/"+parts[2])
		switch {
		case parts[0] == "0" && ctrls == "":
			// v2: the limit of the cgroup and each parent up to the
			// root; in a container's namespace the path may be "/".
			for p := path; ; p = filepath.Dir(p) {
				consider(filepath.Join(root, p), "memory.max")
				if p == "/" {
					break
				}
			}
		case hasController(ctrls, "memory"):
			// v1: under the memory hierarchy's mount; a container sees
			// its own cgroup at the mount's root.
			consider(filepath.Join(root, "memory", path), "memory.limit_in_bytes")
			consider(filepath.Join(root, "memory"), "memory.limit_in_bytes")
		}
	}
	return best, found
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
