# aws-k8s: one binary, every AWS platform component of a Kubernetes cluster.
#   make                         build ./aws-k8s
#   make test                    build and run every test (unit + integration)
#   make SANITIZE=address,undefined test   the same under ASan+UBSan
#   make tsan                    the unit tests under ThreadSanitizer (build/tsan/)
#   make check                   the static checks: -Werror build, cppcheck, tests/check/run
#   make bench                   run the benchmarks under tests/bench/
#   make static                  build/static/aws-k8s: static and stripped (mk/static.mk)
#   make install [PREFIX=/usr/local] [DESTDIR=]   aws-k8s and the links named like upstream
#   make image [IMAGE_BIN=build/static/aws-k8s]   the container image, an OCI archive (build/image/)
#   make clean
CC ?= cc
PKGS := libcurl openssl zlib libcjson yaml-0.1 libmicrohttpd libxml-2.0 grpc libprotobuf-c blkid mount
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS := $(shell pkg-config --libs $(PKGS))

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
GIT_DIRTY := $(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

ifeq ($(SANITIZE),thread)
B := build/tsan
BIN := $(B)/aws-k8s
else ifdef SANITIZE
B := build/san
BIN := $(B)/aws-k8s
else ifdef STATIC
B := build/static
BIN := $(B)/aws-k8s.debug
include mk/static.mk
else
B := build/default
BIN := aws-k8s
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
	-Wwrite-strings -Wvla -Wno-unused-parameter -Wno-format-nonliteral -Wno-missing-field-initializers
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=gnu17 $(WARN) $(CFLAGS) -D_GNU_SOURCE -I. -I$(B)/gen $(PKG_CFLAGS) -MMD -MP
LDLIBS := $(PKG_LIBS) -lpthread -lm

ifdef SANITIZE
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
endif

PROTOS := $(shell find common modules -name '*.proto' 2>/dev/null)
GEN_C := $(patsubst %.proto,$(B)/gen/%.pb-c.c,$(PROTOS))
GEN_H := $(GEN_C:.c=.h)
LIB_SRCS := $(shell find common modules -name '*.c' 2>/dev/null | sort)
LIB_OBJS := $(patsubst %.c,$(B)/%.o,$(LIB_SRCS)) $(GEN_C:.c=.o)
TEST_SRCS := $(wildcard tests/unit/*.c)
TEST_OBJS := $(patsubst %.c,$(B)/%.o,$(TEST_SRCS))
UNIT := $(B)/unit-tests

.PHONY: all test unit tsan check bench demo clean fmt lint install image static FORCE
.SECONDARY: $(GEN_C) $(GEN_H)
all: $(BIN)

$(BIN): $(B)/main.o $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(UNIT): $(TEST_OBJS) $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: %.proto
	@mkdir -p $(dir $@)
	protoc-c --proto_path=$(dir $<) --c_out=$(dir $@) $<

# The version header is rewritten only when the version or the commit changes.
VERSION_H := $(B)/gen/awsk8s_version.h
$(VERSION_H): FORCE
	@mkdir -p $(dir $@)
	@printf '#define AWSK8S_VERSION "%s"\n#define AWSK8S_COMMIT "%s"\n' '$(VERSION)' \
		'$(GIT_COMMIT)$(GIT_DIRTY)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

$(B)/%.o: %.c | $(GEN_H) $(VERSION_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(B)/gen/%.pb-c.o: $(B)/gen/%.pb-c.c
	$(CC) $(filter-out -Wmissing-prototypes,$(ALL_CFLAGS)) -c -o $@ $<

# The README's test command. tests/run prints the closing "N passed, N failed, N skipped" line.
test: $(BIN) $(UNIT)
	AWS_K8S=$(abspath $(BIN)) UNIT_TESTS=$(abspath $(UNIT)) \
		$(if $(SANITIZE),BINARY_TESTS_ONLY=1 TEST_LOGDIR=$(abspath $(B))/test-logs) tests/run

# Under SANITIZE=thread, the libraries built without it are suppressed (tests/unit/tsan.supp).
ifeq ($(SANITIZE),thread)
SAN_ENV := TSAN_OPTIONS="second_deadlock_stack=1 suppressions=$(abspath tests/unit/tsan.supp) \
	$(TSAN_OPTIONS)"
endif

unit: $(UNIT)
	$(SAN_ENV) $(UNIT) $(UNIT_ARGS)

# ThreadSanitizer over the unit tests of the threaded parts (objects in build/tsan/). The whole
# suite runs under it with `make SANITIZE=thread unit`.
TSAN_TESTS := kube_wq kube_controllers grpc_ cancel signals http_ aws_batch aws_creds kube_rest \
	kube_events
tsan:
	$(MAKE) SANITIZE=thread unit UNIT_ARGS="$(TSAN_TESTS)"

# A short fuzz run for CI: every libFuzzer target of tests/fuzz/ for FUZZ_SECONDS (30) each,
# with ASan and UBSan; fails on any crash, and when clang or its fuzzer runtime is missing.
.PHONY: fuzz-ci
fuzz-ci:
	tests/fuzz/ci.sh --ci

# One static binary, build/static/aws-k8s (mk/static.mk); the libraries Debian has no static
# archive of are built once into build/deps/ by tools/static-deps.sh.
static:
	tools/static-deps.sh
	$(MAKE) STATIC=1 build/static/aws-k8s

demo: $(BIN)
	AWS_K8S=$(abspath $(BIN)) tests/demo/run

bench: $(BIN)
	AWS_K8S=$(abspath $(BIN)) tests/bench/run

# Mutation tests: each one-line change of tests/mutants/list, made in a scratch copy of the tree,
# must make the tests it names fail. MUTANTS_ARGS=--ci runs the short subset CI runs.
.PHONY: mutants
mutants: $(BIN) $(UNIT)
	tests/mutants/run $(MUTANTS_ARGS)

fmt:
	clang-format -i $$(git ls-files '*.c' '*.h')

# cppcheck; its false positives are listed in tests/check/cppcheck.supp.
lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppressions-list=tests/check/cppcheck.supp -I. -D_GNU_SOURCE main.c common modules

# The build with -Werror, cppcheck, then every executable tests/check/*.sh and *.py
# (tests/check/run): banned functions, the compile-must-fail test of the log API, the
# copy-paste detector (jscpd: `npm ci --prefix tests/check` installs it), the cycle check...
check: $(BIN) $(UNIT)
	@$(MAKE) --no-print-directory lint
	@echo "ok - lint (cppcheck)"
	tests/check/run

# aws-k8s into $(DESTDIR)$(BINDIR), with a symlink named like each upstream binary it replaces or
# will replace (main.c's table; `make image` makes the same links): called by such a name
# it runs that component, with the upstream command line.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
UPSTREAM_NAMES := aws-cloud-controller-manager aws-ebs-csi-driver node-termination-handler \
	kube-rbac-proxy
install: $(BIN)
	install -d '$(DESTDIR)$(BINDIR)'
	install -m 0755 $(BIN) '$(DESTDIR)$(BINDIR)/aws-k8s'
	for n in $(UPSTREAM_NAMES); do ln -sfn aws-k8s '$(DESTDIR)$(BINDIR)'/$$n || exit 1; done

# The container image as an OCI image layout archive, built by tools/oci-image.py without a
# container engine (load it with `skopeo copy oci-archive:build/image/aws-k8s.oci.tar ...` or
# `podman load`): the static binary at /usr/bin/aws-k8s with a link per upstream name and
# command name, and the file system tools the CSI node plugin runs, copied from this machine
# with their libraries. Reproducible: time stamps are SOURCE_DATE_EPOCH (default: the commit's).
IMAGE_BIN ?= build/static/aws-k8s
IMAGE_OUT ?= build/image/aws-k8s.oci.tar
IMAGE_LINKS := $(UPSTREAM_NAMES) ccm csi-controller csi-node ebs-csi-driver nth rbac-proxy \
	discoverer cpm
IMAGE_TOOLS := mkfs.ext2 mkfs.ext3 mkfs.ext4 mkfs.xfs e2fsck resize2fs xfs_growfs
IMAGE_EPOCH = $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null),0)
GIT_REVISION = $(shell git rev-parse HEAD 2>/dev/null)
GIT_SOURCE = $(shell git config --get remote.origin.url 2>/dev/null)
image:
	tools/oci-image.py --binary '$(IMAGE_BIN)' --out '$(IMAGE_OUT)' --version '$(VERSION)' \
		--revision '$(if $(GIT_REVISION),$(GIT_REVISION)$(GIT_DIRTY))' \
		--source '$(GIT_SOURCE)' --epoch '$(IMAGE_EPOCH)' \
		$(addprefix --link ,$(IMAGE_LINKS)) $(addprefix --tool ,$(IMAGE_TOOLS))

clean:
	rm -rf build aws-k8s

-include $(LIB_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(B)/main.d
