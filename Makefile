# SPDX-License-Identifier: GPL-2.0-only
#
# pcinet, out of tree.  `make` builds the module against Debian's 6.12
# headers (found by scripts/setup.sh), or the running kernel's without
# them; `make KDIR=<headers tree>` builds against any other kernel.
# See README.md for check, demo and bench.

TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
-include $(TOP)/build/env.mk

# Without build/env.mk (a real machine): the running kernel's headers.
KDIR ?= /lib/modules/$(shell uname -r)/build
SRC := $(TOP)/drivers/net/pcinet
KBUILD_ARGS = -C $(KDIR) M=$(SRC) CONFIG_PCINET=m

.PHONY: all module debug-kernel debug-module fabric ntb ntb-stack unit setup check check-all demo chassis bench bench-storage bench-scale bench-chassis bench-virtio bench-vhost bench-ntb soak \
	style sparse w1 w1-6.1 w1-6.12 gates install dkms clean

all: module fabric

setup:
	$(TOP)/scripts/setup.sh

module:
	$(MAKE) $(KBUILD_ARGS) modules

# The debug guest kernel (KASAN, lockdep, kmemleak...), built once and
# cached outside the checkout, and the module built against it in its own
# directory (the sources are copied: an external module builds in place).
debug-kernel:
	$(TOP)/scripts/debug-kernel.sh

debug-module: debug-kernel
	mkdir -p $(TOP)/build/debug-module/uapi
	cp -u $(SRC)/Makefile $(SRC)/*.[ch] $(TOP)/build/debug-module/
	cp -u $(SRC)/uapi/*.h $(TOP)/build/debug-module/uapi/
	. $(TOP)/build/env-debug.sh && \
		$(MAKE) -C $$KDIR M=$(TOP)/build/debug-module CONFIG_PCINET=m modules

fabric:
	$(MAKE) -C $(TOP)/tools/pcinet-fabric

# The kernel's NTB stack (Debian's kernel is built without it), built once
# from linux-source-6.12 and cached outside the checkout, the test-only
# emulated NTB device the QEMU cases run it on, and pcinet_ntb.ko beside
# pcinet.ko.
ntb-stack:
	$(TOP)/scripts/ntb-modules.sh >/dev/null

ntb: ntb-stack
	. $(TOP)/build/env-ntb.sh && $(MAKE) -C $(TOP)/tools/testing/pcinet/ntb-ivshmem \
		KDIR=$(KDIR) NTB_SYMVERS=$$NTB_DIR/Module.symvers && \
		$(MAKE) $(KBUILD_ARGS) CONFIG_PCINET_NTB=m \
		KBUILD_EXTRA_SYMBOLS=$$NTB_DIR/Module.symvers modules

unit:
	$(MAKE) -C $(TOP)/tools/testing/pcinet check

# The gates, each failing on any diagnostic (scripts/no-diagnostics.sh):
# W=1 against every supported kernel (cleaned first, so every file is
# compiled again), sparse, checkpatch --strict and kernel-doc.
NODIAG := $(TOP)/scripts/no-diagnostics.sh
W1 = $(MAKE) -s -C $(1) M=$(SRC) CONFIG_PCINET=m clean >/dev/null && \
	$(NODIAG) $(MAKE) -C $(1) M=$(SRC) CONFIG_PCINET=m W=1 $(2) modules
# pcinet_ntb.ko links against the NTB core built by scripts/ntb-modules.sh
# (6.12 only); on 6.1 it is compiled, not linked.  The emulated NTB device
# (test-only) is held to the same W=1.
NTB_ARGS = CONFIG_PCINET_NTB=m KBUILD_EXTRA_SYMBOLS=$$NTB_DIR/Module.symvers
EMU := $(TOP)/tools/testing/pcinet/ntb-ivshmem

w1-6.1:
	$(if $(KDIR_61),$(call W1,$(KDIR_61)) && \
		$(NODIAG) $(MAKE) -C $(KDIR_61) M=$(SRC) CONFIG_PCINET=m CONFIG_PCINET_NTB=m W=1 pcinet_ntb.o,\
		@echo "w1-6.1: no 6.1 headers (scripts/setup.sh)"; exit 1)

w1-6.12: ntb-stack
	. $(TOP)/build/env-ntb.sh && $(call W1,$(KDIR),$(NTB_ARGS)) && \
		$(MAKE) -s -C $(KDIR) M=$(EMU) clean >/dev/null && \
		$(NODIAG) $(MAKE) -C $(KDIR) M=$(EMU) W=1 \
		KBUILD_EXTRA_SYMBOLS=$$NTB_DIR/Module.symvers modules

w1: w1-6.1 w1-6.12

sparse: ntb-stack
	. $(TOP)/build/env-ntb.sh && \
		$(NODIAG) $(MAKE) $(KBUILD_ARGS) $(NTB_ARGS) C=2 W=1 modules && \
		$(NODIAG) $(MAKE) -C $(KDIR) M=$(EMU) C=2 W=1 \
		KBUILD_EXTRA_SYMBOLS=$$NTB_DIR/Module.symvers modules

style:
	$(NODIAG) $(TOP)/scripts/checkpatch.sh

# w1-6.12 last: it leaves the module built for Debian's 6.12.
gates: w1-6.1 sparse style w1-6.12

# On a real machine: install the module for the kernel of KDIR (run as
# root; then depmod), or let DKMS rebuild it for every kernel (dkms.conf).
install:
	$(MAKE) $(KBUILD_ARGS) modules_install
	depmod $(if $(KVER),$(KVER))

# DKMS builds for Debian's 6.12 and 6.1 headers, then cleans up.
dkms:
	$(TOP)/scripts/dkms-check.sh

# make check: README's test command and .ci/run's, inside CI's time;
# make check-all: every case on both kernels (scripts/check.sh, the tiers).
check:
	TIER=check KERNEL="$(KERNEL)" REPEAT="$(REPEAT)" $(TOP)/scripts/check.sh $(TESTS)

check-all:
	TIER=all KERNEL="$(KERNEL)" REPEAT="$(REPEAT)" $(TOP)/scripts/check.sh $(TESTS)

demo:
	$(TOP)/scripts/demo.sh

# A host and BOARDS boards (default 4), one link each, bridged on the host
# (tests/qemu/chassis.py); KEEP=1 leaves it running.
chassis:
	BOARDS="$(BOARDS)" KEEP="$(KEEP)" $(TOP)/scripts/demo.sh chassis

bench:
	$(TOP)/scripts/bench.sh

# make bench's storage section alone: bench/results/storage.{json,md}
bench-storage:
	$(TOP)/scripts/bench.sh --only storage

# make bench's scaling section alone: bench/results/scale.{json,md,png}
bench-scale:
	$(TOP)/scripts/bench.sh --only scale

# make bench's chassis section alone (host + 4 boards, iperf3 board to board
# through the host's br0): bench/results/chassis.{json,md}
bench-chassis:
	$(TOP)/scripts/bench.sh --only chassis

# virtio-blk over pcinet against NBD over pcinet0 (QEMU's own virtio-blk as
# reference), virtio-fs over pcinet against 9P/TCP over pcinet0, served from
# this machine by pcinet-peer (one board guest, ~15 min):
# bench/results/virtio.{json,md}
bench-virtio:
	$(TOP)/scripts/bench.sh --only virtio

# Stage 3, the route users deploy: the board's virtio disk served by
# pcinet-vhost + qemu-storage-daemon in a host guest on the same fabric,
# against NBD over pcinet0 from the same daemon there (two guests, ~10 min):
# bench/results/vhost.{json,md}
bench-vhost:
	$(TOP)/scripts/bench.sh --only vhost

# pcinet on the emulated NTB against mainline ntb_netdev on the same device
# and against pcinet on ivshmem, in the same two guests (issue 23):
# bench/results/ntb.{json,md}
bench-ntb:
	$(TOP)/scripts/bench.sh --only ntb

# Traffic and faults of every kind for MINUTES (default 10) on the debug
# kernel (KERNEL=debian for Debian's): see tests/qemu/soak.py.
soak:
	$(TOP)/scripts/setup.sh >/dev/null
	$(MAKE) -s module fabric debug-module
	$(MAKE) -s -C $(TOP)/tools/testing/pcinet all
	PCINET_KERNEL=$(or $(KERNEL),debug) MINUTES=$(or $(MINUTES),10) \
		python3 $(TOP)/tests/qemu/soak.py

clean:
	-$(MAKE) $(KBUILD_ARGS) clean
	-$(MAKE) -C $(TOP)/tools/pcinet-fabric clean
	-$(MAKE) -C $(TOP)/tools/testing/pcinet clean
	-$(MAKE) -C $(TOP)/tools/pcinet-vhost clean
	-$(MAKE) -C $(TOP)/tools/pcinet-peer clean
