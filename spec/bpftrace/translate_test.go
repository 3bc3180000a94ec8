package bpftrace

import (
	"fmt"
	"strings"
	"testing"
)

// body is the spec without its comment lines and blank lines.
func body(out []byte) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		lines = append(lines, strings.TrimRight(l, " "))
	}
	return strings.Join(lines, "\n")
}

// TestImportPatterns holds the translation of each pattern the hand
// ports use to the spec it must write, exactly.
func TestImportPatterns(t *testing.T) {
	for _, tc := range []struct{ name, bt, want string }{
		{"entry and exit of the same functions are one probe; @start[tid] a saved value", `
kprobe:vfs_read, kprobe:vfs_write { @start[tid] = nsecs; }
kretprobe:vfs_read, kretprobe:vfs_write /@start[tid]/ {
  @us[func] = hist((nsecs - @start[tid]) / 1000);
  delete(@start, tid);
}`, `probe "kernel" "vfs_read" {
  functions = ["vfs_read", "vfs_write"]
  on_entry {
    save = { start = ktime }
  }
  on_exit {
    hist "us" {
      value = (ktime - entry.start) / 1000
      by    = [func]
    }
  }
}`},
		{"a map read by another probe is a table; deletes come last", `
tracepoint:syscalls:sys_enter_kill { @sig[tid] = args.sig; }
tracepoint:syscalls:sys_exit_kill /@sig[tid]/ {
  delete(@sig, tid);
  @r[comm] = count();
}`, `table "sig" {
}
probe "tracepoint" "sys_enter_kill" {
  event = "syscalls:sys_enter_kill"
  on_entry {
    store "sig" {
      key   = [tid]
      value = args.sig
    }
  }
}
probe "tracepoint" "sys_exit_kill" {
  event = "syscalls:sys_exit_kill"
  on_entry {
    when = sig[tid] != 0
    count "r" {
      by = [comm]
    }
    delete "sig" {
      key = [tid]
    }
  }
}`},
		{"a delete on both copies of a fork is one delete, under neither branch", `
tracepoint:a:b { @c[tid] = comm; @t[tid] = 1; }
tracepoint:a:c /@t[tid]/ {
  $x = ntop(0);
  if (@c[tid] == "") { $x = ntop(AF_INET, 1); } else { $x = ntop(AF_INET, 2); }
  printf("%s\n", $x);
  delete(@t, tid);
  delete(@c, tid);
}`, `table "c" {
}
table "t" {
}
probe "tracepoint" "b" {
  event = "a:b"
  on_entry {
    store "c" {
      key   = [tid]
      value = comm
    }
    store "t" {
      key   = [tid]
      value = 1
    }
  }
}
probe "tracepoint" "c" {
  event = "a:c"
  on_entry {
    when = t[tid] != 0
    event "c" {
      when = c[tid] == ""
      fields = {
        x = inet(1)
      }
    }
    event "c_2" {
      when = c[tid] != ""
      fields = {
        x = inet(2)
      }
    }
    delete "t" {
      key = [tid]
    }
    delete "c" {
      key = [tid]
    }
  }
}`},
		{"if, else and return are conditions; ternaries, casts and bit operators", `
#define MASK 0xff
tracepoint:sched:sched_switch {
  if (args.next_pid == 0) { return; }
  if (args.prev_state & MASK) {
    @a = count();
  } else {
    @b[(uint32)args.prev_pid > 10 ? 1 : 0] = sum(args.prev_prio << 2);
  }
}`, `probe "tracepoint" "sched_switch" {
  event = "sched:sched_switch"
  on_entry {
    count "a" {
      when = args.next_pid != 0 && band(args.prev_state, hex("0xff")) != 0
    }
    sum "b" {
      when  = args.next_pid != 0 && band(args.prev_state, hex("0xff")) == 0
      value = shl(args.prev_prio, 2)
      by    = [u32(args.prev_pid) > 10 ? 1 : 0]
    }
  }
}`},
		{"printf is an event named by BEGIN's header; variables and -> through BTF", `
BEGIN { printf("%-6s %-16s %s\n", "PID", "COMM", "DPORT"); }
kprobe:tcp_connect {
  $sk = (struct sock *)arg0;
  printf("%-6d %-16s %d\n", pid, comm, $sk->__sk_common.skc_dport);
}`, `probe "kernel" "tcp_connect" {
  functions = ["tcp_connect"]
  on_entry {
    event "tcp_connect" {
      fields = {
        pid   = pid
        comm  = comm
        dport = cast(arg0, "struct sock").__sk_common.skc_dport
      }
    }
  }
}`},
		{"BEGIN's constant strings are labels; a tuple variable is a key", `
BEGIN { @name[0] = "zero"; @name[1] = "one"; }
tracepoint:block:block_rq_issue {
  $k = (args.dev, args.sector);
  @n[$k, @name[args.bytes & 1]] = count();
}`, `labels "name" {
  values = {
    "0" = "zero"
    "1" = "one"
  }
}
probe "tracepoint" "block_rq_issue" {
  event = "block:block_rq_issue"
  on_entry {
    count "n" {
      by = [args.dev, args.sector, labels(name, band(args.bytes, 1))]
    }
  }
}`},
		{"a for loop of constant bounds is written out, $i each step's number", `
kprobe:vfs_read {
  $s = 0;
  for $i : 0..2 {
    if (arg2 > $i * 100) { $s += 1; }
  }
  @steps = hist($s);
}`, `probe "kernel" "vfs_read" {
  functions = ["vfs_read"]
  on_entry {
    hist "steps" {
      value = arg2 > 1 * 100 ? (arg2 > 0 * 100 ? 0 + 1 : 0) + 1 : arg2 > 0 * 100 ? 0 + 1 : 0
    }
  }
}`},
		{"unroll(N) writes its block out N times", `
kprobe:vfs_read {
  $s = arg2;
  unroll(2) { $s = $s >> 1; }
  @q = hist($s);
}`, `probe "kernel" "vfs_read" {
  functions = ["vfs_read"]
  on_entry {
    hist "q" {
      value = shr(shr(arg2, 1), 1)
    }
  }
}`},
		{"macros expand; getopt is its default; uprobes and profiles", `
macro enabled() { getopt("enabled", true) }
macro bump(@m, k) { @m[k] = count(); }
uretprobe:/bin/bash:readline /enabled/ { bump(@lines, pid); }
profile:hz:49 { @cpu = lhist(cpu, 0, 8, 1); }`, `probe "user" "readline" {
  binary    = "/bin/bash"
  functions = ["readline"]
  on_exit {
    count "lines" {
      by = [pid]
    }
  }
}
probe "profile" "profile" {
  frequency = 49
  on_entry {
    lhist "cpu" {
      value = cpu
      min   = 0
      max   = 8
      step  = 1
    }
  }
}`},
		{"usdt: a user probe with usdt, one per USDT probe; arguments kept", `
usdt:/usr/bin/python3.11:python:function__entry,U:/usr/bin/python3.11:python:function__return { @calls[str(arg1)] = count(); }`, `probe "user" "function__entry" {
  binary = "/usr/bin/python3.11"
  usdt   = "python:function__entry"
  on_entry {
    count "calls" {
      by = [str(arg1)]
    }
  }
}
probe "user" "function__return" {
  binary = "/usr/bin/python3.11"
  usdt   = "python:function__return"
  on_entry {
    count "calls" {
      by = [str(arg1)]
    }
  }
}`},
		{"a stored pointer's field: the struct the tracepoint's format names; a system call's in user memory", `
tracepoint:syscalls:sys_enter_nanosleep { @p[tid] = args.rqtp; }
tracepoint:syscalls:sys_exit_nanosleep { $t = @p[tid]; @n[$t.tv_sec] = count(); }`, `table "p" {
}
probe "tracepoint" "sys_enter_nanosleep" {
  event = "syscalls:sys_enter_nanosleep"
  on_entry {
    store "p" {
      key   = [tid]
      value = args.rqtp
    }
  }
}
probe "tracepoint" "sys_exit_nanosleep" {
  event = "syscalls:sys_exit_nanosleep"
  on_entry {
    count "n" {
      by = [user_cast(p[tid], "struct __kernel_timespec").tv_sec]
    }
  }
}`},
		{"a stored pointer of another tracepoint points into kernel memory", `
tracepoint:capability:cap_capable { @c[tid] = args.cred; }
tracepoint:syscalls:sys_exit_capset { @n[@c[tid]->uid.val] = count(); }`, `table "c" {
}
probe "tracepoint" "cap_capable" {
  event = "capability:cap_capable"
  on_entry {
    store "c" {
      key   = [tid]
      value = args.cred
    }
  }
}
probe "tracepoint" "sys_exit_capset" {
  event = "syscalls:sys_exit_capset"
  on_entry {
    count "n" {
      by = [cast(c[tid], "struct cred").uid.val]
    }
  }
}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diags := Import("t.bt", []byte(tc.bt))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got := body(out); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestImportRefuses holds that what has no equivalent stops the import
// at its line and column, naming it.
func TestImportRefuses(t *testing.T) {
	for _, tc := range []struct{ bt, want, detail string }{
		{"kprobe:f { @x = hist(rand); }", "1:22 Unsupported rand", ""},
		{"kprobe:f { printf(\"x\\n\"); cat(\"/etc/shadow\"); }", "1:31 Refused cat() of \"/etc/shadow\"", "/proc/loadavg, /proc/uptime"},
		{"kprobe:f { printf(\"x\\n\"); cat(\"/proc/../etc/passwd\"); }", "1:31 Refused cat() of \"/proc/../etc/passwd\"", "as root"},
		{"kprobe:f { printf(\"x\\n\"); cat(\"/proc/%d/maps\", pid); }", "1:27 Unsupported cat()", "one path"},
		{"kprobe:f { cat(\"/proc/loadavg\"); }", "1:12 Unsupported cat() without a printf", ""},
		{"kprobe:f { printf(\"x\\n\"); if (pid == 1) { cat(\"/proc/loadavg\"); } }", "1:43 Unsupported cat() without a printf", ""},
		{"BEGIN { cat(\"/proc/loadavg\"); }\nkprobe:f { @n = count(); }", "1:9 Unsupported cat() in BEGIN", ""},
		{"kprobe:f {\n  for $i : 0..9 { @x = count(); }\n}", "2:3 Unsupported for loop", "working directory"},
		{"kprobe:f {\n  for $i : 0..3 { if (arg0 == $i) { break; } @x = count(); }\n}", "2:3 Unsupported for loop", "no break"},
		{"kprobe:f {\n  for $i : 0..arg0 { @x = count(); }\n}", "2:15 Unbounded for loop", "constants"},
		{"kprobe:f { @m[1] = 1; for $kv : @m { @x = count(); } }", "1:23 Unsupported for loop over a map", "print(@m)"},
		{"kprobe:f { break; }", "1:12 Unsupported break", ""},
		{"tracepoint:a:b {\n  $d = curtask.fs.pwd.dentry;\n  for $j : 0..35 { @p[tid, $j] = str($d.d_name.name); @n = count(); $d = $d.d_parent; }\n}", "3:3 Unsupported for loop", ""},
		{"kprobe:f { for $i : 0..3 { continue; } }", "1:12 Unsupported for loop", ""},
		{"kprobe:f { for $i : 0..2 { return; } }", "1:12 Unsupported return in a loop", ""},
		{"kprobe:f { unroll(20) { $x = 1; } @n = count(); }", "1:12 Unsupported for loop", ""},
		{"kprobe:f { unroll(arg0) { $x = 1; } }", "1:19 Unbounded for loop", ""},
		{"kprobe:f { unroll 3 { } }", "1:19 Syntax error", ""},
		{"kprobe:f { for $i 0..3 { } }", "1:19 Syntax error", ""},
		{"kprobe:f { for $i : 0 3 { } }", "1:23 Syntax error", ""},
		{"kprobe:f { for i : 0..3 { } }", "1:16 Syntax error", "$variable"},
		{"tracepoint:a:b { @x[tid] = 1; }\ntracepoint:a:c { if (@x[tid]) { @x[tid] = 2; @n = count(); } }", "2:46 Unsupported condition on a changed map", ""},
		{"tracepoint:a:b { @x[tid] = 1; }\ntracepoint:a:c { delete(@x, tid); @n[@x[tid]] = count(); }", "2:35 Read after delete", ""},
		{"tracepoint:a:b { @x = count(); }\ntracepoint:a:c { @y = hist(@x); }", "2:28 Unsupported aggregation read", ""},
		{"usdt:/bin/x:n { @n = count(); }", "1:1 USDT probe without provider", ""},
		{"U:/bin/x:p:n* { @n = count(); }", "1:1 Unsupported USDT glob", ""},
		{"usdt:/bin/x { @n = count(); }", "1:1 Invalid attach point", ""},
		{"kprobe:f { @n[$1] = count(); }", "1:15 Unsupported positional parameter", ""},
		{"kprobe:f { exit(); }", "1:12 Unsupported exit", "after a printf"},
		{"END { $a = kaddr(\"avenrun\"); printf(\"x\\n\"); }\nkprobe:f { @n = count(); }", "1:12 Unsupported kaddr() in END", "an interval probe reads kernel variables"},
		{"kprobe:f { @n[*arg0] = count(); }", "1:15 Unsupported operator *", ""},
		{"interval:s:20 { printf(\"%d\\n\", *kaddr(\"avenrun\")); }", "1:1 Unsupported interval", "10000 ns to 10 s"},
		{"kprobe:f { @n[*kaddr(\"aven run;\")] = count(); }", "1:22 Invalid kernel symbol \"aven run;\"", "letters, digits"},
		{"interval:s:1 { $a = kaddr(\"9lives\"); printf(\"%d\\n\", *$a); }\nkprobe:f { @n = count(); }", "1:27 Invalid kernel symbol \"9lives\"", "/proc/kallsyms"},
		{"kprobe:f { @n[*kaddr(\"\\n\")] = count(); }", "1:22 Invalid kernel symbol \"\\n\"", ""},
		{"kprobe:f { @n[*kaddr(arg0)] = count(); }", "1:22 Invalid kaddr()", "string literal"},
		{"kprobe:f { printf(\"x\\n\"); if (pid == 1) { exit(); } }", "1:43 Unsupported exit", "same condition"},
		{"kprobe:f { @n[af_unknown] = count(); }", "1:15 Unknown name af_unknown", "upper case"},
		{"BEGIN { printf(\"hi\\n\"); }", "1:1 Nothing to measure", ""},
		{"tracepoint:a:b { @x[tid] = 1; }\ntracepoint:a:c { delete(@x, tid); @x[tid] = 2; }", "2:35 Store after delete", ""},
		{"kprobe:f { @n[bswap(arg0)] = count(); }", "1:15 Unsupported bswap()", ""},
		{"kprobe:f { $a = ntop(0); @n[$a] = count(); }", "1:29 Unsupported ntop(0)", ""},
		{"BEGIN { @x[0] = 5; }\ntracepoint:a:b { @n[@x[0]] = count(); @x[1] = 2; }", "1:9 Unsupported store in BEGIN", ""},
		{"kprobe:f { @n = count() }}", "1:26 Syntax error", ""},
		{"kprobe:f { $x = \"a", "1:17 Unterminated string", ""},

		{"tracepoint:a:b { @p[tid] = args.rqtp; }\ntracepoint:a:c { $t = @p[tid]; @n[$t.tv_sec] = count(); }", "2:37 Unsupported field of a stored value", `user_cast(p[tid], "struct NAME").tv_sec`},
		{"tracepoint:syscalls:sys_enter_nanosleep { @p[tid] = args.rqtp; }\ntracepoint:capability:cap_capable { @p[tid] = args.cred; }\ntracepoint:a:c { @n[@p[tid]->tv_sec] = count(); }", "3:28 Unsupported field of a stored value", "no built-in profile's format"},
		{"tracepoint:a:b { @a[tid] = 1; @b[tid] = 2; }\ntracepoint:a:c { if (@a[tid] && @b[tid]) { @n = count(); delete(@a, tid); delete(@b, tid); } }", "2:58 Unsupported deletes", "the delete from @a tests @b; the delete from @b tests @a"},
	} {
		_, diags := Import("t.bt", []byte(tc.bt))
		if len(diags) != 1 {
			t.Errorf("%q: want one diagnostic, got %v", tc.bt, diags)
			continue
		}
		d := diags[0]
		got := fmt.Sprintf("%d:%d %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary)
		if got != tc.want || d.Subject.Filename != "t.bt" || !strings.Contains(d.Detail, tc.detail) {
			t.Errorf("%q: got %s (%s: %s), want %s", tc.bt, got, d.Subject.Filename, d.Detail, tc.want)
		}
	}
}

// TestImportOneLiners imports the one-liners of bpftrace's tutorial,
// old syntax (args->x) and new, each to a spec that validates.
func TestImportOneLiners(t *testing.T) {
	// What has no equivalent stops with a diagnostic naming it.
	for _, tc := range []struct{ bt, summary string }{
		{`BEGIN { printf("hello world\n"); }`, "Nothing to measure"}, // a spec; run -e runs it (TestImportBegin)
		{`software:fault:1 { @[comm] = count(); }`, "Unknown software event"},
		{`hardware:faults:1 { @[comm] = count(); }`, "Unknown hardware event"},
		{`software:cpu-clock:1000 { @[comm] = count(); }`, "Unsupported software period"},
	} {
		_, diags := Import("one.bt", []byte(tc.bt))
		if !diags.HasErrors() || diags[0].Summary != tc.summary {
			t.Errorf("%s: want the diagnostic %q, got %v", tc.bt, tc.summary, diags)
		}
	}
	for _, bt := range []string{
		`tracepoint:syscalls:sys_enter_openat { printf("%s %s\n", comm, str(args->filename)); }`,
		`tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }`,
		`tracepoint:syscalls:sys_exit_read /pid == 18644/ { @bytes = hist(args->ret); }`,
		`kretprobe:vfs_read { @bytes = lhist(retval, 0, 2000, 200); }`,
		`kprobe:vfs_read { @start[tid] = nsecs; } kretprobe:vfs_read /@start[tid]/ { @ns[comm] = hist(nsecs - @start[tid]); delete(@start[tid]); }`,
		`profile:hz:99 /pid == 189/ { @[ustack] = count(); }`,
		`tracepoint:block:block_rq_insert { @[kstack] = count(); }`,
		`kprobe:do_nanosleep { printf("PID %d sleeping...\n", pid); }`,
		`tracepoint:syscalls:sys_enter_* { @[probe] = count(); }`,
		`kfunc:vfs_read { @[comm] = sum(args->count); }`,
		`t:syscalls:sys_enter_kill /args.sig == 9/ { @kills[comm, args.pid] = count(); }`,
		`kprobe:vfs_* { @[func] = count(); } interval:s:5 { exit(); }`,
		`uprobe:/bin/bash:readline { @calls = count(); } uretprobe:/bin/bash:readline { @lines[pid] = count(); }`,
		// The rest of the tutorial's lessons, and bpftrace's README one-liners.
		`tracepoint:sched:sched* { @[probe] = count(); } interval:s:5 { exit(); }`,
		`profile:hz:99 { @[kstack] = count(); }`,
		`tracepoint:sched:sched_switch { @[kstack] = count(); }`,
		`tracepoint:block:block_rq_issue { @ = hist(args.bytes); }`,
		`tracepoint:syscalls:sys_exit_read /args.ret/ { @[comm] = sum(args.ret); }`,
		`tracepoint:syscalls:sys_exit_read { @[comm] = hist(args.ret); }`,
		`tracepoint:block:block_rq_issue { printf("%d %s %d\n", pid, comm, args.bytes); }`,
		`tracepoint:syscalls:sys_enter_execve { printf("%s -> %s\n", comm, str(args.filename)); }`,
		`tracepoint:syscalls:sys_enter_openat /pid == cpid/ { @[comm] = count(); }`,
		`tracepoint:raw_syscalls:sys_enter { @ = count(); } interval:s:1 { print(@); clear(@); }`,
		`tracepoint:syscalls:sys_enter_execve { join(args.argv); }`,
		`kprobe:vfs_open { printf("open path: %s\n", str(((struct path *)arg0)->dentry->d_name.name)); }`,
		`software:faults:1 { @[comm] = count(); }`,
		`hardware:cache-misses:1000000 { @[comm, pid] = count(); }`,
	} {
		if _, diags := ImportWith("one.bt", []byte(bt), Options{CPID: 1234}); diags.HasErrors() {
			t.Errorf("%s: %v", bt, diags)
		}
	}
}

// TestImportPerfEvents imports software: and hardware: probes as profile
// probes on bpftrace's events: its names and aliases, its default
// periods, a clock's period as time.
func TestImportPerfEvents(t *testing.T) {
	for _, tc := range []struct{ bt, want string }{
		{`software:faults:1 { @[comm] = count(); }`, `probe "profile" "page_faults" {
  event  = "page-faults"
  period = 1`},
		{`s:cs { @ = count(); }`, `event  = "context-switches"
  period = 1000`},
		{`software:cpu:2000000 { @ = count(); }`, `event     = "cpu-clock"
  period_ns = 2000000`},
		{`hardware:cache-misses { @[comm, pid] = count(); }`, `probe "profile" "cache_misses" {
  event  = "cache-misses"
  period = 1000000`},
		{`h:branches:50000 { @ = count(); }`, `event  = "branch-instructions"
  period = 50000`},
	} {
		out, diags := Import("one.bt", []byte(tc.bt))
		if diags.HasErrors() {
			t.Errorf("%s: %v", tc.bt, diags)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: the spec lacks\n%s\n in\n%s", tc.bt, tc.want, out)
		}
	}
}

// TestImportKaddr: an interval probe reading kernel variables by kaddr
// runs in the kernel, a cpu-clock timer on one CPU every interval, and *
// of a kaddr (plus or minus an offset) reads a u64 there; an interval
// probe without kaddr still only prints.
func TestImportKaddr(t *testing.T) {
	for _, tc := range []struct{ bt, want string }{
		{`interval:s:1 { $a = kaddr("avenrun"); printf("%d %d\n", *$a, *($a + 8)); }`, `probe "profile" "interval" {
  event     = "cpu-clock"
  period_ns = 1000000000
  one_cpu   = true`},
		{`interval:ms:250 { printf("%d\n", *(kaddr("avenrun") + 16) >> 11); }`, `shr(kernel_u64(kaddr("avenrun") + 16), 11)`},
		{`kprobe:f { @[*kaddr("jiffies")] = count(); }`, `by = [kernel_u64(kaddr("jiffies"))]`},
	} {
		out, diags := Import("one.bt", []byte(tc.bt))
		if diags.HasErrors() {
			t.Errorf("%s: %v", tc.bt, diags)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: the spec lacks\n%s\n in\n%s", tc.bt, tc.want, out)
		}
	}
	out, diags := Import("one.bt", []byte(`kprobe:f { @n = count(); } interval:s:1 { print(@n); }`))
	if diags.HasErrors() || strings.Contains(string(out), "one_cpu") {
		t.Errorf("an interval probe that only prints became a timer: %v\n%s", diags, out)
	}
}

// TestImportBegin: for probectl run, a program of BEGIN alone is what it
// prints, and whether it exits; with probes, BEGIN's text comes along.
func TestImportBegin(t *testing.T) {
	for _, tc := range []struct {
		bt, begin  string
		exit, spec bool
	}{
		{`BEGIN { printf("hello world\n"); }`, "hello world\n", false, false},
		// bpftrace 0.17 prints %% after the last conversion as written,
		// and % before it (measured: "ab    |c 100%%", "a%b x|", "none 5%%").
		{`BEGIN { printf("%-6s|%s 100%%\n", "ab", "c"); exit(); }`, "ab    |c 100%%\n", true, false},
		{`BEGIN { printf("a%%b %s|\n", "x"); exit(); }`, "a%b x|\n", true, false},
		{`BEGIN { printf("none 5%%\n"); exit(); }`, "none 5%%\n", true, false},
		{`BEGIN { printf("Tracing... Hit Ctrl-C to end.\n"); } tracepoint:raw_syscalls:sys_enter { @ = count(); }`, "Tracing... Hit Ctrl-C to end.\n", false, true},
		{`BEGIN { printf("one\n"); exit(); } END { printf("two\n"); }`, "one\n", true, false},
	} {
		r, diags := ImportRun("one.bt", []byte(tc.bt), Options{})
		if diags.HasErrors() {
			t.Errorf("%s: %v", tc.bt, diags)
			continue
		}
		if r.BeginText != tc.begin || r.BeginExit != tc.exit || (r.Spec != nil) != tc.spec {
			t.Errorf("%s: got begin %q exit %v spec %v, want %q %v %v", tc.bt, r.BeginText, r.BeginExit, r.Spec != nil, tc.begin, tc.exit, tc.spec)
		}
	}
	// An interval alone still has nothing to run.
	if _, diags := ImportRun("one.bt", []byte(`interval:s:1 { printf("tick\n"); }`), Options{}); !diags.HasErrors() || diags[0].Summary != "Nothing to measure" {
		t.Errorf("interval alone: got %v, want Nothing to measure", diags)
	}
}
