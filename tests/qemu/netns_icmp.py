#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""ICMP helpers for test_peer's peer-mtu case, run on the host inside the
peer's network namespace (ip netns exec NS python3 netns_icmp.py ...): the
guests have only busybox ping, which cannot set the don't-fragment bit,
and the host may have no ping at all.

  netns_icmp.py ping DST SIZE
      One ICMP echo request of SIZE payload bytes (random) to DST with
      IP_PMTUDISC_DO: DF set, and never fragmented here.  Prints one line:
      "reply N" (a reply came, with the same N payload bytes), "emsgsize"
      (the kernel refused it here: larger than the route's MTU, as DF
      requires) or "timeout" (nothing in 3 s, after 3 tries).
  netns_icmp.py sniff IFNAME
      Until SIGTERM: every IPv4 ICMP frame on IFNAME (fragments included),
      one line each: "in" (sent to us) or "out", the IP total length, DF
      (0/1), MF (0/1) and the fragment offset in bytes.
"""

import os
import select
import signal
import socket
import struct
import sys
import time

IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33


def csum(data):
    if len(data) % 2:
        data += b'\0'
    s = sum(struct.unpack(f'!{len(data) // 2}H', data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ping(dst, size):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    ident = os.getpid() & 0xffff
    payload = os.urandom(size)
    for seq in range(1, 4):
        hdr = struct.pack('!BBHHH', 8, 0, 0, ident, seq)
        pkt = hdr + payload
        pkt = pkt[:2] + struct.pack('!H', csum(pkt)) + pkt[4:]
        try:
            s.sendto(pkt, (dst, 0))
        except OSError as e:
            if e.errno == 90:		# EMSGSIZE
                return 'emsgsize'
            raise
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            r, _, _ = select.select([s], [], [], deadline - time.monotonic())
            if not r:
                break
            data = s.recv(70000)
            ihl = (data[0] & 15) * 4
            t, _, _, rid, rseq = struct.unpack('!BBHHH', data[ihl:ihl + 8])
            if t == 0 and rid == ident and rseq == seq:
                got = data[ihl + 8:]
                return f'reply {len(got)}' if got == payload else \
                    f'reply {len(got)} with other bytes'
    return 'timeout'


def sniff(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(ETH_P_ALL))
    # root in the netns: past net.core.rmem_max, for 64 KiB frames
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    s.bind((ifname, 0))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print('ready', flush=True)
    while True:
        data, addr = s.recvfrom(70000)
        if len(data) < 34 or data[12:14] != b'\x08\x00' or data[23] != 1:
            continue
        tot, frag = struct.unpack('!H2xH', data[16:22])
        print('out' if addr[2] == PACKET_OUTGOING else 'in', tot,
              int(bool(frag & 0x4000)), int(bool(frag & 0x2000)),
              (frag & 0x1fff) * 8, flush=True)


if __name__ == '__main__':
    if sys.argv[1:2] == ['ping'] and len(sys.argv) == 4:
        print(ping(sys.argv[2], int(sys.argv[3])))
    elif sys.argv[1:2] == ['sniff'] and len(sys.argv) == 3:
        sniff(sys.argv[2])
    else:
        sys.exit(__doc__)
