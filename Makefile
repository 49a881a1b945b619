# etcdlet — build, test, demo, bench, lint.
#
#   make demo      three agents on 127.0.0.1-3 form a cluster, a fourth joins, one leaves
#   make test      everything the tests need, then every test (unit + end-to-end)
#   make lint      gofmt, go vet and golangci-lint (.golangci.yml), the checks make test starts with
#   make campaign  a fault campaign of CAMPAIGN_DURATION (1h) against real agents, as root
#   make packages  the .deb and .rpm for amd64 and arm64 in dist/ (docs/packaging.md)

SHELL      := /bin/bash
GO         ?= go
BIN        := bin/etcdlet
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X main.version=$(VERSION)
# End-to-end tests start real etcd clusters; they need time, not retries.
# The timeout guards against a hang, not against a slow machine: the e2e
# package takes about 17 min alone on 2 cores, and beside another make
# test it went past 25 min; CI allows 90.
TEST_FLAGS ?= -count=1 -timeout 45m

# The Go toolchain is the one go.mod's go line names, whatever Go the
# machine has: go1.27.3 and later fix an HTTP/2 server race through which
# any client could crash the agent. A machine's own Go does not switch by
# itself (go.dev's and Debian's go.env set GOTOOLCHAIN=local), so every go
# command here and in hack/ (hack/lib/toolchain.sh) runs with it exported;
# the first one downloads it through the Go module proxy (about 10 s).
export GOTOOLCHAIN := $(shell awk '$$1 == "go" { print "go" $$2; exit }' go.mod)

.PHONY: all build test test-deps unit e2e sim campaign demo bench lint packages clean

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/etcdlet

# test-deps installs what the tests need and fails loudly when it cannot.
test-deps:
	@hack/test-deps.sh

# hack/envtest.sh builds kube-apiserver and etcd from the Go module proxy
# once, into a cache outside the repository ($HOME/.cache/etcdlet), and
# prints where; the tests find them through KUBEBUILDER_ASSETS. hack/druid.sh
# (etcd-druid, ETCDLET_DRUID), hack/versitygw.sh (the S3 server,
# ETCDLET_VERSITYGW), hack/etcdbrctl.sh (ETCDLET_ETCDBRCTL), hack/etcd35.sh
# and hack/etcd36.sh (etcd 3.5 and 3.6 servers, ETCDLET_ETCD35 and
# ETCDLET_ETCD36) and hack/promtool.sh (Prometheus's promtool, which checks the shipped alert
# rules: ETCDLET_PROMTOOL) do the same.
ASSETS := assets="$$(hack/envtest.sh)" && export KUBEBUILDER_ASSETS="$$assets" && druid="$$(hack/druid.sh)" && export ETCDLET_DRUID="$$druid" && s3="$$(hack/versitygw.sh)" && export ETCDLET_VERSITYGW="$$s3" && br="$$(hack/etcdbrctl.sh)" && export ETCDLET_ETCDBRCTL="$$br" && e35="$$(hack/etcd35.sh)" && export ETCDLET_ETCD35="$$e35" && e36="$$(hack/etcd36.sh)" && export ETCDLET_ETCD36="$$e36" && pt="$$(hack/promtool.sh)" && export ETCDLET_PROMTOOL="$$pt"
# The end-to-end tests also need hack/nfpm.sh (the packager, ETCDLET_NFPM),
# hack/debian-root.sh (the pristine Debian host the nspawn tests boot,
# ETCDLET_DEBIAN_ROOT; debootstrap, as root), hack/kube-node.sh (the kubelet
# and kubeadm, ETCDLET_KUBE_NODE) and hack/containerd-debs.sh (Debian's
# containerd and runc for the real-kubelet hosts, ETCDLET_CONTAINERD_DEBS),
# cached the same way.
E2E_ASSETS := $(ASSETS) && nfpm="$$(hack/nfpm.sh)" && export ETCDLET_NFPM="$$nfpm" && debroot="$$(hack/debian-root.sh)" && export ETCDLET_DEBIAN_ROOT="$$debroot" && kube="$$(hack/kube-node.sh)" && export ETCDLET_KUBE_NODE="$$kube" && ctrd="$$(hack/containerd-debs.sh)" && export ETCDLET_CONTAINERD_DEBS="$$ctrd"

# hack/test.sh runs lint (gofmt, go vet, golangci-lint), the unit packages
# (-race) and the end-to-end tests side by side; every step runs to its end
# and the summary names every failing package and test.
test: test-deps
	@GO="$(GO)" TEST_FLAGS="$(TEST_FLAGS)" hack/test.sh

unit:
	$(ASSETS) && $(GO) test $(TEST_FLAGS) -race $$($(GO) list ./... | grep -v -e '/test$$' -e '/test/campaign$$')

e2e:
	$(E2E_ASSETS) && $(GO) test $(TEST_FLAGS) -v ./test/

# A long campaign of the membership simulator (docs/development.md):
# SIM_DURATION of schedules from a fresh range of seeds, then the rate and
# what they covered. A failing seed prints its replay command.
SIM_DURATION ?= 10m
sim:
	$(GO) test -count=1 -timeout 0 ./daemon/sim/ -run TestCampaign -sim.duration=$(SIM_DURATION) -v

# A fault campaign against real agents (docs/development.md): five hosts in
# network namespaces, clients checked for linearizability, faults and list
# changes drawn from CAMPAIGN_SEED (a fresh one when 0) for
# CAMPAIGN_DURATION, of the kinds CAMPAIGN_ONLY names (all when empty), the
# list read from CAMPAIGN_SOURCE (file or etcd-resource; drawn from the seed
# when empty). A violation prints the seed, the replay command and where
# the logs were kept. As root.
CAMPAIGN_DURATION ?= 1h
CAMPAIGN_SEED ?= 0
CAMPAIGN_ONLY ?=
CAMPAIGN_SOURCE ?=
campaign:
	$(ASSETS) && $(GO) test -count=1 -timeout 0 ./test/campaign/ -run TestCampaign -campaign.duration=$(CAMPAIGN_DURATION) -campaign.seed=$(CAMPAIGN_SEED) -campaign.only=$(CAMPAIGN_ONLY) -campaign.source=$(CAMPAIGN_SOURCE) -campaign.faults=0 -v

#
# The demo's build says what it does: on a cold machine it fetches the
# modules and compiles etcd and the Kubernetes libraries for minutes, which
# must not look like a hang (one line per 100 packages; errors in full).
demo:
	@echo "== building $(BIN): a first build fetches the Go modules and compiles etcd and the Kubernetes libraries (minutes on a cold machine); later builds take seconds"
	@set -o pipefail; start=$$(date +%s); \
	  $(GO) build -v -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/etcdlet 2>&1 | hack/build-progress.awk; \
	  echo "== built $(BIN) in $$(( $$(date +%s) - start )) s"
	@hack/demo.sh $(BIN)

# Membership latency (members-file write to the change seen), idle CPU and
# RSS (embedded and static-pod runtimes), the static-pod runtime's render and
# start to READY=1: each against a floor measured in the same run (see
# docs/development.md); the same joins and leaves again with a keyspace of
# 1 GiB (ETCDLET_BENCH_JOIN_MIB) that every join copies, about 12 minutes;
# then the pacemaker Go benchmarks (ns/op, allocs/op);
# then reporting to a real kube-apiserver: a pacemaker change to the stored
# status against crm_mon's own run time, and API calls per minute per agent
# at steady state (over ETCDLET_BENCH_WINDOW, default 1m); then a full
# snapshot of a 1 GiB keyspace (ETCDLET_BENCH_SNAPSHOT_MIB) to a directory
# and to the local S3 server against etcdctl's snapshot save plus an upload
# of the file, and the rolling defrag's time per member against a direct
# Defragment call.
bench:
	$(ASSETS) && $(GO) run ./test/bench
	$(GO) run ./test/bench -keyspace $${ETCDLET_BENCH_JOIN_MIB:-1024} -runs 3 -idle 10s -static-pod=false
	$(GO) test -run '^$$' -bench . -benchmem ./daemon/pacemaker/
	$(ASSETS) && $(GO) test -run '^$$' -bench PacemakerChange -benchtime 50x ./daemon/kube/
	$(ASSETS) && $(GO) test -run '^$$' -bench SteadyState -benchtime 1x ./daemon/kube/
	$(ASSETS) && ETCDLET_BENCH_SNAPSHOT_MIB=$${ETCDLET_BENCH_SNAPSHOT_MIB:-1024} $(GO) test -run '^$$' -bench FullSnapshot -benchtime 1x -timeout 30m ./daemon/snapshot/
	$(GO) test -run '^$$' -bench Defrag -benchtime 3x -timeout 30m ./daemon/ops/

# The .deb and .rpm (nfpm v2.45.0, built once into the cache by hack/nfpm.sh)
# for amd64 and arm64 into dist/, reproducible. hack/packages.sh reads
# VERSION (default: from git describe), RELEASE, DIST, ARCHES and
# SOURCE_DATE_EPOCH from the environment or the command line, e.g.
# `make packages VERSION=1.2.0 DIST=out`; see docs/packaging.md.
packages:
	@hack/packages.sh

# gofmt, go vet and golangci-lint v2.15.0 (built once into the cache by
# hack/golangci-lint.sh; its linters and exclusions are in .golangci.yml):
# the checks make test starts with, alone.
lint:
	@out=$$(gofmt -l .); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@lint="$$(hack/golangci-lint.sh)" && "$$lint" run ./...

clean:
	rm -rf bin dist
