# queen: a replicated message broker that speaks the Queen MQ HTTP API.
GO       ?= go
PKGS     ?= ./...
FUZZTIME ?= 30s
BENCHTIME ?= 1s

.PHONY: build test test-short lint fuzz bench run clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/queen ./cmd/queen

# The README's test command. -race and the invariants tag turn on the costly checks.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -tags invariants -timeout 20m $(PKGS)

test-short:
	$(GO) test -short -tags invariants $(PKGS)

lint:
	$(GO) vet $(PKGS)
	gofmt -l . | tee /dev/stderr | (! read)
	$(GO) test -run TestImports ./

# Each fuzz target for FUZZTIME (go test allows one target per run).
# -fuzzminimizetime keeps a worker from stalling a minute on each new input.
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s
fuzz:
	$(FUZZ) ./fuzz -fuzz '^FuzzClamp$$'
	$(FUZZ) ./fuzz -fuzz '^FuzzSegmentDecode$$'
	$(FUZZ) ./fuzz -fuzz '^FuzzSegmentRoundTrip$$'
	$(FUZZ) ./raft/logstore -fuzz '^FuzzDecodeLog$$'

bench:
	$(GO) test ./bench -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME)

run: build
	./bin/queen serve --data ./data

clean:
	rm -rf bin data
