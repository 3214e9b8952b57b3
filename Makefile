# fastfence — build, test and demo entry points. Every target that needs tools runs
# the idempotent setup first (scripts/setup.sh; seconds when nothing changed).
SHELL := /bin/bash
# The checkout's physical path (symlinks resolved), the same way scripts/setup.sh resolves
# its own: a checkout reached through a symbolic link names one .cache either way.
ROOT := $(realpath $(dir $(lastword $(MAKEFILE_LIST))))
export PATH := $(ROOT)/.cache/bin:$(ROOT)/node_modules/.bin:$(PATH)
# kafkajs trips Node 24's TimeoutNegativeWarning (kafkajs#1751, harmless); type stripping warns once.
export NODE_OPTIONS := --disable-warning=TimeoutNegativeWarning --disable-warning=ExperimentalWarning
VITEST := node node_modules/vitest/vitest.mjs

.PHONY: artifact setup setup-node test test-all test-kafka-clients test-unit test-integration test-deploy lint lint-tsc lint-eslint lint-prettier demo bench bench-bmc bench-api-stall chaos clean reap

setup:
	@$(ROOT)/scripts/setup.sh

setup-node:
	@$(ROOT)/scripts/setup.sh node npm examples

## artifact: the packed product (.cache/artifact/fastfence.tgz, what the Containerfile installs), unpacked
## with production dependencies only outside the checkout (what the tests, the lab and the benches run)
artifact: setup-node
	@node scripts/artifact.ts

## lint: eslint, prettier and the TypeScript type check (the three at once: each uses one core)
lint: setup-node
	@echo "== lint: tsc --noEmit, eslint, prettier"
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint-tsc lint-eslint lint-prettier

lint-tsc:
	@node node_modules/typescript/bin/tsc --noEmit -p .
lint-eslint:
	@node node_modules/eslint/bin/eslint.js --max-warnings 0 .
lint-prettier:
	@node node_modules/prettier/bin/prettier.cjs --check --log-level warn .

## test-unit: fast tests, no servers (< 1 minute); then the examples' own tests (examples/, through their runtimes)
test-unit: setup-node
	@$(ROOT)/scripts/setup.sh kustomize
	@$(VITEST) run --project unit
	@$(VITEST) run --project examples

## test-integration: tests against real kube-apiserver, etcd, Kafka, BMC emulators, in lanes (harness/test-lanes.ts: the heavy
## files beside the rest in two shards, then the labs alone; FASTFENCE_TEST_LANES=1 one lane after the other; vitest args in VITEST_ARGS)
test-integration: setup
	@scripts/reap.sh
	@node scripts/test-integration.ts $(VITEST_ARGS); rc=$$?; scripts/reap.sh; exit $$rc

## test-kafka-clients: the Kafka bus contract on the client(s) `make test` does not run (@platformatic/kafka;
## make test runs the default, kafkajs); .ci/run runs it after make test
test-kafka-clients: setup
	@scripts/reap.sh
	@FASTFENCE_TEST_KAFKA_CLIENTS=$$(node -e 'import("./harness/env/kafka-clients.ts").then(m=>console.log(m.otherKafkaClients().join(",")))') \
	  $(VITEST) run --project 'integration*' test/integration/bus-kafka.test.ts test/integration/bus-kafka-freeze.test.ts \
	  test/integration/kafka-runtime-dlq.test.ts test/integration/kafka-runtime-flood.test.ts; rc=$$?; scripts/reap.sh; exit $$rc

## test-deploy: the documented install steps applied for real (kustomize + kubectl) to a kube-apiserver reset to its
## state just after start, with the prerequisites' CRDs; every overlay dry-run-applied with the real CRDs; RBAC table confirmed
test-deploy: setup
	@node scripts/gen-config-reference.ts --check
	@$(VITEST) run --project 'integration*' test/integration/deploy-

## test: everything (lint, unit, integration incl. deploy validation); budget 15 minutes on 2 cores after setup.
## Ends with the wall time of every test file, slowest first, then the failed files with their first errors
## (.cache/reports/test-times-<run>.md), pass or fail.
test: export FASTFENCE_TEST_RUN := $(shell date -u +%Y%m%d-%H%M%S)
test:
	@rc=0; $(MAKE) --no-print-directory test-all || rc=$$?; node scripts/test-times.ts "$$FASTFENCE_TEST_RUN" || true; exit $$rc

test-all: setup lint test-unit test-integration
	@node scripts/gen-config-reference.ts --check

## demo: the lab — 3 nodes (IPMI + Redfish BMCs), crash the busiest node, live timeline, trace, report, RESULT line
demo: setup
	@node lab/demo.ts

## bench: end-to-end fencing benchmark on the lab, compact control plane (BENCH_ARGS="--trials 20 --other 3 --baseline 1 --control-plane compact|host"; ~30 min with the watchdog scenarios)
bench: setup
	@node bench/lab.ts $(BENCH_ARGS)

## chaos: seeded fault schedules on the compact lab, invariant + liveness checks (CHAOS_ARGS="--schedules 6 --seed 1"; ~2 min a schedule)
chaos: setup
	@node bench/chaos.ts $(CHAOS_ARGS)

## bench-api-stall: survivors' API servers after a control-plane node's silent crash (API_STALL_ARGS="--trials 3"; ~2 min a trial)
bench-api-stall: setup
	@node bench/api-stall.ts $(API_STALL_ARGS)

## bench-bmc: off command → power-off confirmed, ours vs fence_ipmilan / fence_redfish (20 rounds each)
bench-bmc: setup
	@scripts/reap.sh
	@node bench/bmc.ts; rc=$$?; scripts/reap.sh; exit $$rc

reap:
	@scripts/reap.sh
	@node cli/main.ts lab down >/dev/null 2>&1 || true

clean:
	rm -rf .cache/run .cache/reports
