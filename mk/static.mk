# make static: build/static/aws-k8s, one static, stripped binary (Makefile includes this file
# when STATIC is set; `make static` builds the libraries first, then runs make STATIC=1).
# Its objects are built with the same flags as the default build, in build/static/.
# - tools/static-deps.sh builds into build/deps/prefix the libraries Debian 12 ships no usable
#   static archive of (libcurl, cJSON, libmount and libblkid, libmicrohttpd, libxml2), from
#   Debian's source packages at the versions it pins; their .pc files come first here.
# - the others are Debian's own .a files: gRPC with its closure (address_sorting, upb, gpr,
#   re2, abseil; pkg-config --static lists them), protobuf-c, OpenSSL, zlib, c-ares, libyaml.
# - gRPC is C++: libstdc++ is linked in; the whole list is one link group, since the abseil
#   archives refer to each other in more than one order.
DEPS_PREFIX := $(abspath build/deps/prefix)
ifeq ($(wildcard $(DEPS_PREFIX)/stamps/*),)
$(error $(DEPS_PREFIX) is empty: run tools/static-deps.sh first, or `make static`)
endif
STATIC_PKG_CONFIG := PKG_CONFIG_PATH=$(DEPS_PREFIX)/lib/pkgconfig pkg-config
PKG_CFLAGS := $(shell $(STATIC_PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS := -Wl,--start-group $(shell $(STATIC_PKG_CONFIG) --static --libs $(PKGS)) -lstdc++ \
	-Wl,--end-group
LDFLAGS += -static -Wl,--gc-sections

# The stripped binary next to the linked one ($(BIN), build/static/aws-k8s.debug).
$(B)/aws-k8s: $(BIN)
	strip -o $@ $<
