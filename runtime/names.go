package runtime

import "strings"

// The names below come from state files and bpffs directories, which may
// be hostile: each is checked against the charset and length it was made
// with. Hand-written rather than regexps: a bounded repetition such as
// {1,128} compiles into that many copies, and compiling them at package
// initialisation cost every command 4 ms and 3,700 allocations.

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isDigits(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isWord: [A-Za-z0-9_]{min,max}.
func isWord(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return false
		}
	}
	return true
}

// isWorkspaceName is the documented charset of workspace names,
// [A-Za-z0-9][A-Za-z0-9_-]{0,63}: a name becomes a directory name in the
// state directory and in bpffs.
func isWorkspaceName(s string) bool {
	if len(s) < 1 || len(s) > 64 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' && s[i] != '-' {
			return false
		}
	}
	return true
}

// isMapRef: a map's reference in the state, [A-Za-z][A-Za-z0-9_]{0,200}.
func isMapRef(s string) bool {
	return len(s) > 0 && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') && isWord(s[1:], 0, 200)
}

// isLinkPin: a link's pin, link_[0-9]{1,7}.
func isLinkPin(s string) bool {
	n, ok := strings.CutPrefix(s, "link_")
	return ok && isDigits(n, 1, 7)
}

// isProbeDir: the directories Apply pins probes under,
// (kernel|user|tracepoint|profile|table|events)-[A-Za-z0-9_]{1,128}-[0-9]{1,19}.
func isProbeDir(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return false
	}
	switch parts[0] {
	case "kernel", "user", "tracepoint", "profile", "table", "events":
	default:
		return false
	}
	return isWord(parts[1], 1, 128) && isDigits(parts[2], 1, 19)
}
