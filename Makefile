# sensorpipe: sensor readings into Bigtable and BigQuery with Apache Beam (Go).
#   make run   the main job: a batch over testdata/ on prism against local emulators
#   make test  every test (unit, prism pipeline, emulator end-to-end)
#   make stream  the streaming job on prism, fed by a real-time publisher (Ctrl-C stops it)
#   make samples load the traffic and user_events samples for the query examples (README, Querying Bigtable)

export BIGTABLE_EMULATOR_HOST ?= 127.0.0.1:8086
export BIGQUERY_EMULATOR_HOST ?= 127.0.0.1:9050
export BIGQUERY_STORAGE_EMULATOR_HOST ?= 127.0.0.1:9060
export PUBSUB_EMULATOR_HOST ?= 127.0.0.1:8085

PROJECT ?= local-project
INSTANCE ?= local-instance
INPUT ?= testdata/vitals/*
DEAD_LETTER ?= .run/deadletter
GO_TEST_FLAGS ?= -timeout 25m

.PHONY: run test test-short doctest generate fuzz fuzz-short bench bench-backlog bench-batching bench-cadence bench-memory bench-rekey bench-formats lint emulators stop-emulators env stream samples help

## help: list every target with what it does (this list).
help:
	@awk '/^## [a-z-]+:/ { sub(/^## /, ""); i = index($$0, ": "); printf "  %-15s %s\n", substr($$0, 1, i - 1), substr($$0, i + 2); next } \
		/^##   / { sub(/^##   /, ""); printf "  %-15s   %s\n", "", $$0 }' Makefile

LAUNCHER := bin/sensorpipe

## run: start the Bigtable and BigQuery emulators if they are not up, build the launcher, run the batch pipeline on testdata/ on prism, print a summary and a few rows.
run:
	@scripts/emulators.sh start bigtable bigquery
	@echo "building the launcher into $(LAUNCHER) (the first build compiles Beam and takes 2-3 minutes; later builds take seconds)..."
	@go build -o $(LAUNCHER) ./launch
	@echo "running the batch on $(INPUT) on prism"
	$(LAUNCHER) --source=files --input='$(INPUT)' \
		--bigtable_project=$(PROJECT) --bigtable_instance=$(INSTANCE) --bigtable_table=patient_vitals \
		--bigquery_project=$(PROJECT) --bigquery_dataset=vitals --bigquery_table=readings \
		--dead_letter=$(DEAD_LETTER) --print_rows=3
	@echo "The Bigtable and BigQuery emulators are still running. To use them from this shell: eval \"\$$(make env)\"; to stop them: make stop-emulators"

## samples: load testdata/samples/traffic.jsonl and user_events.jsonl into their specs' tables in the local Bigtable emulator (the README's query examples read them).
samples:
	@scripts/emulators.sh start bigtable
	@echo "building the launcher into $(LAUNCHER) (the first build compiles Beam and takes 2-3 minutes; later builds take seconds)..."
	@go build -o $(LAUNCHER) ./launch
	$(LAUNCHER) --spec=traffic --input=testdata/samples/traffic.jsonl \
		--bigtable_project=$(PROJECT) --bigtable_instance=$(INSTANCE) --dead_letter=$(DEAD_LETTER)-traffic --progress_interval=0
	$(LAUNCHER) --spec=user_events --input=testdata/samples/user_events.jsonl \
		--bigtable_project=$(PROJECT) --bigtable_instance=$(INSTANCE) --dead_letter=$(DEAD_LETTER)-user_events --progress_interval=0

## stream: the streaming job on prism: emulators up, topic and subscription created, readings published in real time (RATE, SENSORS, DURATION, BAD_FRACTION, LATE_FRACTION); Ctrl-C stops it cleanly (its ledger, exit 0).
stream:
	PROJECT=$(PROJECT) INSTANCE=$(INSTANCE) DEAD_LETTER=$(DEAD_LETTER)-stream scripts/stream.sh

## test: every test; the emulator tests start their own emulator processes on free ports.
test:
	go test $(GO_TEST_FLAGS) ./...

## test-short: unit and pipeline tests only, no emulators.
test-short:
	go test -short ./...

## fuzz: every Go fuzz target (JSON and proto parsers, row keys, dead-letter encoding) for FUZZTIME each (default 5m); seeds in testdata/fuzz/.
FUZZTIME ?= 5m
FUZZ_TARGETS := FuzzParseJSON FuzzParseProto FuzzRowKey FuzzDeadLetter FuzzUTCTimestampFastPath
fuzz:
	@for f in $(FUZZ_TARGETS); do echo "== $$f ($(FUZZTIME))"; \
		go test ./schemas/hours -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) || exit 1; done

## fuzz-short: each fuzz target for 40,000 inputs, a few seconds (CI runs it). A count, not a
##   duration: Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded"
##   and no crasher when a -fuzztime duration ends (golang/go#75804, fixed in Go 1.27); a count has
##   no deadline to race. 40,000 is about what 5 s ran here (32,000-58,000 inputs per target).
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=40000x

## bench: micro-benchmarks (among them a stream's read-back and merge per closed sensor-hour, against the Bigtable emulator), the BigQuery emulator's dedup-query latency over 1M rows, and the end-to-end throughput comparison, with the batch merge's cost into empty tables and a re-run of the same 300,000 readings side by side with its first run (see README, docs/performance.md).
##   BENCH_FLAGS e.g. -count 5; E2E_FLAGS e.g. -sensors 2000 -cpuprofile .run/pipeline.pprof
bench:
	go test -run '^$$' -bench . -benchmem $(BENCH_FLAGS) ./schemas/... ./dofns/...
	go test -run '^$$' -bench BenchmarkDedupQuery1M -benchtime 3x $(BENCH_FLAGS) ./launch/bqemulator/bqemu/sqlengine/
	@mkdir -p .run
	go run ./launch/bench/e2e -out .run/bench-e2e.json $(E2E_FLAGS)
	go run ./launch/bench/stream $(STREAM_FLAGS)
	@$(MAKE) --no-print-directory bench-backlog
	@$(MAKE) --no-print-directory bench-batching
	@$(MAKE) --no-print-directory bench-cadence
	@$(MAKE) --no-print-directory bench-memory
	@$(MAKE) --no-print-directory bench-rekey
	@$(MAKE) --no-print-directory bench-formats

## bench-backlog: the stream against a plain subscriber, side by side: 200,000 readings of 1,000 sensors published first to each side's own
##   Pub/Sub emulator; the launcher drains one, a plain Go subscriber (v2 Receive, 16 streams, ApplyBulk of 1,000 rows, 4 in flight) the other,
##   each into a fresh Bigtable emulator, after a warm-up drain of as many messages by each way of pulling on each emulator, so that neither
##   side pays its emulator's warm-up; both rates, CPU per reading and the emulators' CPU (4-5 minutes).
##   BACKLOG_FLAGS e.g. -readings 50000 (quick), -cpuprofile .run/stream-backlog.pprof, -launcher_args=--early_firing=2s
bench-backlog:
	@mkdir -p .run
	go run ./launch/bench/stream -backlog $(BACKLOG_FLAGS)

## bench-cadence: make bench's stream run side by side without and with a cadence declared (cadence: 30s in a copy of the spec, under which
##   the stream also tracks every sensor and raises silences to BigQuery's sensor_silences), alternately, each on fresh emulators; it prints
##   each run's figures and the ratios (cadence over none) of the read rate, the launcher's CPU per reading and the p99. CADENCE_PAIRS runs each.
CADENCE_PAIRS ?= 1
bench-cadence:
	@mkdir -p .run
	go run ./launch/bench/stream -cadence 30s -side_by_side -pairs $(CADENCE_PAIRS) -out .run/bench-stream-cadence.json $(STREAM_FLAGS)

## bench-batching: the stream's read rate and Pub/Sub bytes billed per reading with 10 and 100 readings a message
##   (NDJSON; make bench's stream run gives 1 a message). Throughput phase only, 100,000 readings each.
bench-batching:
	@mkdir -p .run
	go run ./launch/bench/stream -rate 0 -per_message 10 -out .run/bench-stream-10.json $(STREAM_FLAGS)
	go run ./launch/bench/stream -rate 0 -per_message 100 -out .run/bench-stream-100.json $(STREAM_FLAGS)

## bench-memory: the launcher's peak RSS (pipeline side only, Bigtable; a 10-minute write retry deadline, as the emulator is the bottleneck at 3 M) on 300 k and 3 M readings from 1,000 sensors, in time order and shuffled, and on a ward's 300 k and 3 M (100 sensors; 3 M span 8.3 hours, so the local batch runs in parts of whole hours; the 1,000 sensors' 3 M are one hour, and run in shares of their identities); the 1,000 sensors' 3 M as one Parquet file (DuckDB's: one hour, so its row groups are read in shares of their identities), and a rekey of them (--source=bigtable from the table a batch wrote: its rows hold whole hours, so one job with no grouping). About 40 minutes.
MEM_E2E := go run ./launch/bench/e2e -sides pipeline -bigquery=false -merge=false -launcher_args=--write_retry_deadline=10m
bench-memory:
	@mkdir -p .run
	$(MEM_E2E) -out .run/mem-300k.json
	$(MEM_E2E) -shuffle -out .run/mem-300k-shuffled.json
	$(MEM_E2E) -seconds 3000 -out .run/mem-3m.json
	$(MEM_E2E) -seconds 3000 -shuffle -out .run/mem-3m-shuffled.json
	$(MEM_E2E) -sensors 100 -seconds 3000 -out .run/mem-ward-300k.json
	$(MEM_E2E) -sensors 100 -seconds 30000 -out .run/mem-ward-3m.json
	$(MEM_E2E) -seconds 3000 -format parquet -out .run/mem-3m-parquet.json
	$(MEM_E2E) -seconds 3000 -rekey -rekey_batch=false -out .run/mem-3m-rekey.json

## bench-rekey: a rekey (--source=bigtable: the workload's vitals table read back and written under testdata/rekey/vitals_salted.yaml) against a file batch of the same 300,000 readings under that spec into an empty table, side by side, each on an emulator of its own; the target is a rekey rate >= 0.8x the batch's.
bench-rekey:
	@mkdir -p .run
	go run ./launch/bench/e2e -rekey -out .run/bench-rekey.json $(REKEY_FLAGS)

## bench-formats: the same 300,000 readings batched from JSON lines, CSV, Parquet (written by DuckDB) and Avro, each into an empty table on
##   an emulator of its own, side by side: readings/s and CPU per reading of each; the target is CSV's and Parquet's rate >= JSON lines'.
bench-formats:
	@mkdir -p .run
	go run ./launch/bench/e2e -formats -out .run/bench-formats.json $(FORMATS_FLAGS)

## lint: gofmt, go vet, and go mod tidy with no diff.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	go vet ./...
	cp go.mod .run-go.mod.bak && cp go.sum .run-go.sum.bak && go mod tidy && \
		{ diff -q go.mod .run-go.mod.bak >/dev/null && diff -q go.sum .run-go.sum.bak >/dev/null; st=$$?; \
		  mv .run-go.mod.bak go.mod; mv .run-go.sum.bak go.sum; \
		  [ $$st -eq 0 ] || { echo "go mod tidy changes go.mod/go.sum: run it and commit"; exit 1; }; }

## emulators: start the Bigtable, BigQuery and Pub/Sub emulators (those not already up) and print their environment variables.
emulators:
	@scripts/emulators.sh start bigtable bigquery pubsub

## env: print the export lines of the emulators' variables: eval "$(make env)" points this shell's launcher, query, publish and cbt at them.
env:
	@echo "export BIGTABLE_EMULATOR_HOST=$(BIGTABLE_EMULATOR_HOST)"
	@echo "export BIGQUERY_EMULATOR_HOST=$(BIGQUERY_EMULATOR_HOST)"
	@echo "export BIGQUERY_STORAGE_EMULATOR_HOST=$(BIGQUERY_STORAGE_EMULATOR_HOST)"
	@echo "export PUBSUB_EMULATOR_HOST=$(PUBSUB_EMULATOR_HOST)"

## stop-emulators: stop the emulators this Makefile started, by process id.
stop-emulators:
	@scripts/emulators.sh stop

## doctest: run the shell examples of README.md and docs/ marked `sh doctest` against emulators of their own, checking their output where the docs show it (make test runs them too).
doctest:
	go test ./internal/doctest -run TestDocs -count=1 -v -timeout 30m

## generate: rewrite the generated docs and schema from the code: docs/reference/flags.md (the flags of launch, publish, query and keys), schemas/spec.schema.json and docs/reference/spec.md (the spec's Go types). Their tests fail until this is run after a change.
generate:
	go test ./launch ./launch/publish ./launch/query ./launch/keys -run TestFlagsReference -update_golden -count=1 -p 1
	go test ./schemas -run 'TestSpecJSONSchema|TestSpecReference' -update -count=1
