# probectl: make test is the test command (README.md, .ci/run).

GO       ?= go
export PATH := $(PATH):/usr/local/go/bin
GOFLAGS  ?=
FUZZTIME ?= 2m
ARCHES   := amd64 arm64

.PHONY: all build static test vet fmt-check demo fuzz bench clean

all: build

# One static binary: no cgo, so it runs on any Linux of its arch, the VMs included.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/probectl ./cmd/probectl

static:
	@for arch in $(ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -o dist/probectl-linux-$$arch ./cmd/probectl || exit 1; \
		if readelf -lW dist/probectl-linux-$$arch | grep -q 'INTERP'; then \
			echo "dist/probectl-linux-$$arch is dynamically linked" >&2; exit 1; \
		fi; \
		echo "dist/probectl-linux-$$arch: static, $$(du -h dist/probectl-linux-$$arch | cut -f1)"; \
	done

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out" >&2; exit 1; fi
	@CGO_ENABLED=0 $(GO) run ./cmd/probectl fmt -check examples

test: fmt-check vet static
	$(GO) test -count=1 ./...

# The main job on the built-in examples: check them and plan them for every
# kernel of the matrix, then for this machine's kernel.
demo: build
	./bin/probectl validate examples
	@for p in linux-6.1-amd64 linux-6.12-amd64 linux-7.2-amd64 linux-6.12-arm64 linux-7.2-arm64; do \
		echo "== plan for $$p"; ./bin/probectl plan -target $$p examples/quickstart.hcl || exit 1; done
	@if [ "$$(id -u)" = 0 ]; then echo "== this machine"; ./bin/probectl target; ./bin/probectl plan examples/syscalls.hcl; fi

fuzz:
	cd spec && $(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) .
	cd compiler && $(GO) test -run='^$$' -fuzz=FuzzCompileVerify -fuzztime=$(FUZZTIME) .

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./compiler

clean:
	rm -rf bin dist
