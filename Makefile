# probectl: make test is the test command (README.md, .ci/run).

GO       ?= go
# Test binaries keep their symbol table (go test strips it by default):
# the runtime's user-probe tests probe a function of the test binary.
TESTFLAGS ?= -ldflags=-s=false
export PATH := $(PATH):/usr/local/go/bin
GOFLAGS  ?=
FUZZTIME ?= 2m
ARCHES   := amd64 arm64

KERNELS  ?= linux-5.10-amd64 linux-6.1-amd64 linux-6.12-amd64 linux-7.2-amd64 linux-5.10-arm64 linux-6.12-arm64 linux-7.2-arm64
VMTESTS  ?= TestKernel

.PHONY: hooks all build static test check unit unit-lab unit-all unit-short kubelab k8s-generate vmtest vmbuild usdt-work vmfetch tracepoints routes-table routes-scale vet lint fmt-check demo fuzz bench dashboards clean

all: build

# The commit-msg hook: subjects as "pkg: summary", the detail in the body.
hooks:
	git config core.hooksPath .githooks

# The build probectl version and probectl_build_info show, from git (go
# build's own VCS stamp misses worktrees); outside git the binary says the
# main module's version and an unknown commit.
PROBECTL_VERSION  ?= $(shell git describe --always --dirty 2>/dev/null)
PROBECTL_COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
PROBECTL_MODIFIED ?= $(shell git status --porcelain >/dev/null 2>&1 && { test -z "$$(git status --porcelain)" && echo false || echo true; })
BUILDINFO := github.com/probectl/probectl/internal/buildinfo
VERSION_LDFLAGS = -X $(BUILDINFO).version=$(PROBECTL_VERSION) -X $(BUILDINFO).commit=$(PROBECTL_COMMIT) -X $(BUILDINFO).modified=$(PROBECTL_MODIFIED)
BINDIR ?= bin

# One static binary: no cgo, so it runs on any Linux of its arch, the VMs included.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(VERSION_LDFLAGS)' -o $(BINDIR)/probectl ./cmd/probectl

static:
	@for arch in $(ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(VERSION_LDFLAGS)' -o dist/probectl-linux-$$arch ./cmd/probectl || exit 1; \
		if readelf -lW dist/probectl-linux-$$arch | grep -q 'INTERP'; then \
			echo "dist/probectl-linux-$$arch is dynamically linked" >&2; exit 1; \
		fi; \
		echo "dist/probectl-linux-$$arch: static, $$(du -h dist/probectl-linux-$$arch | cut -f1)"; \
	done

vet:
	$(GO) vet ./...

# staticcheck, at a pinned version from the Go module proxy.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) ./...

# probectl fmt -check through go run: a compile without -trimpath, the
# one vet, unit and unit-lab then reuse from the build cache (a compile's
# flags are part of its key; CGO_ENABLED is not, for packages without
# cgo). static's -trimpath builds compile apart from them.
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out" >&2; exit 1; fi
	@CGO_ENABLED=0 $(GO) run ./cmd/probectl fmt -check examples examples/bpftrace examples/usdt

# The test command: everything on the host, then the kernel matrix. Each
# phase announces itself and says how long it took. What only waits on
# the network or builds caches starts in the background (its output in
# $(TESTLOGS)): at once the kube lab's build (kubelab) and the kernels'
# download (vmfetch); after lint the static builds (static) and the
# kernel matrix's test binaries (vmbuild), beside unit, whose -p 1 runs
# leave a core idle while tests wait on their probes. A bg-X phase starts
# make X in the background, wait-X waits for it (its log's tail printed
# when it failed): unit-lab needs the lab, vmtest the kernels.
TEST_PHASES := fmt-check vet lint bg-static bg-vmbuild unit wait-static wait-kubelab unit-lab wait-vmbuild wait-vmfetch vmtest
TESTLOGS    ?= bin/test-logs
test:
	@mkdir -p $(TESTLOGS); \
	background() { \
		( s=$$(date +%s); $(MAKE) --no-print-directory $$1 >$(TESTLOGS)/$$1.log 2>&1; rc=$$?; \
		  echo "== make $$1 (background): $$( [ $$rc = 0 ] && echo done || echo FAILED) after $$(( $$(date +%s) - s ))s"; exit $$rc ) & \
		eval "pid_$$1=$$!"; \
		echo "== make $$1: started in the background (log: $(TESTLOGS)/$$1.log)"; \
	}; \
	background kubelab; background vmfetch; \
	for t in $(TEST_PHASES); do \
		start=$$(date +%s); echo "== make $$t"; \
		case $$t in \
		bg-*) background $${t#bg-} ;; \
		wait-*) n=$${t#wait-}; eval "p=\$$pid_$$n"; wait $$p || { tail -n 30 $(TESTLOGS)/$$n.log >&2; false; } ;; \
		*) $(MAKE) --no-print-directory $$t ;; \
		esac || { echo "== make $$t failed after $$(( $$(date +%s) - start ))s" >&2; exit 1; }; \
		echo "== make $$t: $$(( $$(date +%s) - start ))s"; \
	done

# The quick check before a commit: formatting, vet, and the tests that
# need neither the kube lab nor the VMs (go test -short: the tests that
# start the lab skip, saying so; the kernel matrix runs only in VMs).
check:
	@for t in fmt-check vet unit-short; do \
		start=$$(date +%s); echo "== make $$t"; \
		$(MAKE) --no-print-directory $$t || { echo "== make $$t failed after $$(( $$(date +%s) - start ))s" >&2; exit 1; }; \
		echo "== make $$t: $$(( $$(date +%s) - start ))s"; \
	done

# The packages whose tests start the kube lab (they import fleet/kubetest).
LAB_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | grep 'fleet/kubetest' | cut -d' ' -f1)
NOLAB_PKGS = $(filter-out $(LAB_PKGS),$(shell $(GO) list ./...))

# -p 1: packages that attach probes to the same tracepoints and count
# exact numbers run one at a time. (Leak checks look only at the objects a
# test created, so other BPF users on the machine do not matter.) unit
# is the packages that do not need the lab, unit-lab those that do;
# unit-all both (what make unit was).
unit:
	$(GO) test $(TESTFLAGS) -p 1 -count=1 -timeout 30m $(NOLAB_PKGS)

unit-lab: kubelab
	$(GO) test $(TESTFLAGS) -p 1 -count=1 -timeout 45m $(LAB_PKGS)

unit-all: kubelab
	$(GO) test $(TESTFLAGS) -p 1 -count=1 -timeout 45m ./...

unit-short:
	$(GO) test $(TESTFLAGS) -short -p 1 -count=1 ./...

# The Kubernetes lab: kube-apiserver, kubelet, kube-controller-manager,
# kube-scheduler, kubectl and etcd built from the Go module
# proxy into ~/.cache/probectl/kube (cold: minutes; warm: instant). The
# fleet tests start them on loopback (fleet/kubetest).
kubelab:
	@fleet/kubetest/lab.sh >/dev/null

# The Kubernetes API's deepcopy code and CRDs, from the types in
# fleet/api/v1alpha1 (controller-gen from the Go module proxy).
CONTROLLER_GEN ?= sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
k8s-generate:
	$(GO) run $(CONTROLLER_GEN) object paths=./fleet/api/... crd:crdVersions=v1 output:crd:dir=./deploy/kubernetes/crds

# The kernel matrix: Debian's kernels booted in QEMU (TCG) with the runtime
# test binary as the payload of /init (cmd/vmexec, cmd/vminit). Kernels are
# downloaded once into ~/.cache/probectl/vm; qemu is installed when missing.
# A subset: make vmtest KERNELS="linux-6.1-amd64 linux-7.2-arm64".
vmtest: usdt-work
	CGO_ENABLED=0 $(GO) build -o bin/vmexec ./cmd/vmexec
	@fail=""; for k in $(KERNELS); do \
		arch=$${k##*-}; start=$$(date +%s); \
		echo "== $$k"; \
		if ! PROBECTL_VM_KERNEL=$$k CGO_ENABLED=0 GOARCH=$$arch $(GO) test $(TESTFLAGS) -exec $(CURDIR)/bin/vmexec \
			-count=1 -v -run '$(VMTESTS)' ./runtime; then fail="$$fail $$k"; fi; \
		echo "== $$k: $$(( $$(date +%s) - start ))s"; \
	done; \
	if [ -n "$$fail" ]; then echo "kernel matrix failed on:$$fail" >&2; exit 1; fi

# The USDT workload of the kernel matrix (runtime TestKernelUSDT; the VMs
# have no C compiler): runtime/testdata/usdt.c built static for each
# architecture of KERNELS at -O0 and -O2, with the host's sys/sdt.h
# (systemtap-sdt-dev; its text serves every architecture, so it is put
# where a cross compiler finds it), embedded into the runtime test binary.
USDT_CC_amd64 ?= x86_64-linux-gnu-gcc
USDT_CC_arm64 ?= aarch64-linux-gnu-gcc
USDT_WORK     := runtime/testdata/usdtwork
USDT_ARCHES   ?= $(sort $(foreach k,$(KERNELS),$(lastword $(subst -, ,$(k)))))
usdt-work:
	@sdt=$$(ls /usr/include/*/sys/sdt.h /usr/include/sys/sdt.h 2>/dev/null | head -n 1); \
	if [ -z "$$sdt" ]; then echo "usdt-work: no sys/sdt.h (apt-get install systemtap-sdt-dev)" >&2; exit 1; fi; \
	mkdir -p bin/usdt-include/sys && ln -sf $$(dirname $$sdt)/sdt.h $$(dirname $$sdt)/sdt-config.h bin/usdt-include/sys/; \
	for arch in $(USDT_ARCHES); do for opt in O0 O2; do \
		case $$arch in amd64) cc=$(USDT_CC_amd64) ;; arm64) cc=$(USDT_CC_arm64) ;; esac; \
		$$cc -$$opt -static -isystem bin/usdt-include -o $(USDT_WORK)/usdt-$$arch-$$opt runtime/testdata/usdt.c || exit 1; \
	done; done

# The kernel matrix's test binaries (the runtime package's, for each
# arch of KERNELS, as vmtest builds them), built into the build cache
# ahead of vmtest: make test runs this beside unit.
vmbuild: usdt-work
	@mkdir -p bin/vmbuild; for arch in $(USDT_ARCHES); do \
		CGO_ENABLED=0 GOARCH=$$arch $(GO) test $(TESTFLAGS) -c -o bin/vmbuild/runtime-$$arch.test ./runtime || exit 1; \
	done

vmfetch:
	CGO_ENABLED=0 $(GO) build -o bin/vmexec ./cmd/vmexec
	./bin/vmexec -fetch $(KERNELS)

# The profiles' tracepoint formats (bpf/tracepoints/PROFILE.tp.gz): every
# event of tracefs, captured in each kernel of the matrix booted in QEMU.
# The VM matrix fails when a kernel's tracefs no longer matches its file.
tracepoints:
	CGO_ENABLED=0 $(GO) build -o bin/vmexec ./cmd/vmexec
	./bin/vmexec -tracepoints bpf/tracepoints $(KERNELS)

# The measured cost model (compiler/routecost.json, reviewed like a golden
# file): bench/routes measures each link family's per-hit and attach cost
# in each kernel of the matrix (QEMU TCG, a few minutes a kernel); mktable
# merges what each kernel printed, keeping the entries of kernels not run.
ROUTES_LOG ?= bin/routes-logs
# ROUTES_TEST=tracepoints measures only the tracepoint families (minutes,
# not the hour of the function families) and merges them into the table.
ROUTES_TEST ?= all
ROUTES_RUN = $(if $(filter tracepoints,$(ROUTES_TEST)),^TestTracepointRouteCost$$,^TestRouteCost$$)
routes-table:
	CGO_ENABLED=0 $(GO) build -o bin/vmexec ./cmd/vmexec
	@mkdir -p $(ROUTES_LOG); logs=""; for k in $(KERNELS); do \
		arch=$${k##*-}; echo "== $$k"; \
		PROBECTL_VM_KERNEL=$$k CGO_ENABLED=0 GOARCH=$$arch $(GO) test -exec $(CURDIR)/bin/vmexec \
			-count=1 -v -timeout 30m -run '$(ROUTES_RUN)' ./bench/routes | tee $(ROUTES_LOG)/$$k.log || exit 1; \
		logs="$$logs $(ROUTES_LOG)/$$k.log"; \
	done; $(GO) run ./bench/routes/mktable -o compiler/routecost.json $$logs

# probectl's apply of a glob over >= 5,000 functions (one kprobe.multi
# link) against the bare link-create for the same list, as a ratio.
routes-scale:
	CGO_ENABLED=0 $(GO) build -o bin/vmexec ./cmd/vmexec
	PROBECTL_VM_KERNEL=linux-7.2-amd64 CGO_ENABLED=0 GOARCH=amd64 $(GO) test -exec $(CURDIR)/bin/vmexec \
		-count=1 -v -run '^TestScaleKprobeMulti$$' ./bench/routes

# The main job: the built-in example, run for real on this machine (root),
# after a plan of the quickstart example for a kernel of the matrix.
DEMO_DURATION ?= 10s
demo: build
	./bin/probectl validate examples
	./bin/probectl plan -target linux-7.2-amd64 examples/quickstart.hcl
	@if [ "$$(id -u)" != 0 ]; then echo "probectl run attaches probes and needs root: sudo make demo" >&2; exit 1; fi
	./bin/probectl target
	./bin/probectl run -duration $(DEMO_DURATION) -interval 5s

# The Grafana dashboards of the examples (deploy/dashboards), compiled for
# one profile so they do not depend on this machine; TestDashboardsCurrent
# fails when one is stale.
dashboards:
	@for f in examples/*.hcl; do \
		CGO_ENABLED=0 $(GO) run ./cmd/probectl dashboard -target linux-6.12-amd64 $$f > deploy/dashboards/$$(basename $$f .hcl).json || exit 1; \
	done

fuzz:
	cd spec && $(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) .
	cd compiler && $(GO) test -run='^$$' -fuzz=FuzzCompileVerify -fuzztime=$(FUZZTIME) .
	cd internal/flamegraph && $(GO) test -run='^$$' -fuzz=FuzzFlameGraph -fuzztime=$(FUZZTIME) .

# Compiler benchmarks, then (root) start-up and per-hit overhead against
# bpftrace, the scale of specs, and the per-hit overhead of kernel-function
# probes on each route against hand-written C, in the VMs (KPERHIT_KERNELS,
# a few minutes a kernel). Every part's output goes to $(BENCH_LOG) too;
# at the end bench/summary.sh prints issue 22's goals from the lines
#	RATIO name median min max op goal
# the parts print (one word name; op "<=" or "<"; min-max the spread of
# the rounds' own ratios): a new script plugs in by printing such lines.
# A part that fails does not stop the others; make bench then fails.
KPERHIT_KERNELS ?= linux-7.2-amd64 linux-6.12-amd64
BENCH_LOG ?= bin/bench.log
BENCH_PARTS ?= bench/startup.sh bench/perhit.sh bench/tproutes.sh bench/scale.sh bench/plan1k.sh bench/apply1k.sh bench/contend.sh bench/stacks.sh bench/kperhit.sh
bench:
	@mkdir -p $(dir $(BENCH_LOG)); : > $(BENCH_LOG); fail=""; \
	$(GO) test -run='^$$' -bench=. -benchmem ./compiler 2>&1 | tee -a $(BENCH_LOG); \
	for p in $(BENCH_PARTS); do \
		[ -x $$p ] || { echo "== $$p: absent" | tee -a $(BENCH_LOG); continue; }; \
		echo "== $$p" | tee -a $(BENCH_LOG); \
		{ KERNELS="$(KPERHIT_KERNELS)" $$p 2>&1; echo "rc=$$?" > $(BENCH_LOG).rc; } | tee -a $(BENCH_LOG); \
		[ "$$(cat $(BENCH_LOG).rc)" = rc=0 ] || fail="$$fail $$p"; \
	done; rm -f $(BENCH_LOG).rc; \
	bench/summary.sh $(BENCH_LOG); \
	if [ -n "$$fail" ]; then echo "make bench: failed:$$fail" >&2; exit 1; fi

clean:
	rm -rf bin dist $(USDT_WORK)/usdt-*
