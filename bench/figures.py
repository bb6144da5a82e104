# SPDX-License-Identifier: GPL-2.0-only
"""The figures of make bench: one definition of each key, its unit and its
label, used by bench.py (which measures and writes results/latest.json)
and report.py (which reads that file and writes latest.md and latest.png).

A figure's key is "<link>.<name>", e.g. "pcinet.tcp.mtu1500.tx_p4_mbps";
link is one of LINKS or a variant of one (VARIANTS).  A few keys are not
per link (WINDOW, TTY).  In latest.json each key holds {median, min, max,
n, unit, reps} (or "n/a").
"""

MTUS = (1500, 9000, 65535)
HOST_MTU = 65535		# virtio-net-pci host_mtu: a uint16 in QEMU 7.2
PING_COUNT = 1000

LINKS = {
    # name: (guest interface, address of a, address of b)
    'pcinet': ('pcinet0', '10.77.0.1', '10.77.0.2'),
    'virtio_stream': ('eth0', '10.88.0.1', '10.88.0.2'),
}
# pcinet measured again with a setting changed: same figure names
VARIANTS = ('pcinet_threaded', 'pcinet_nocrc')
LABEL = {'pcinet': 'pcinet', 'virtio_stream': 'virtio-net/stream',
         'pcinet_threaded': 'pcinet, threaded', 'pcinet_nocrc': 'pcinet, no CRC'}

# iperf3 streams: the tag in a TCP figure's name
STREAMS = {1: '', 4: 'p4_'}
DIRS = ('tx', 'rx')		# tx = a->b, rx = b->a (iperf3 -R)


def key(link, name):
    """The key of figure name on link."""
    return f'{link}.{name}'


def tcp(mtu, direction, tag='', what='mbps'):
    """TCP figure name: what is mbps, cpu_sender_s_per_gb,
    cpu_receiver_s_per_gb or window_fraction; tag one of STREAMS."""
    return f'tcp.mtu{mtu}.{direction}_{tag}{what}'


def tcp_best(direction, tag=''):
    """virtio's best MTU for a TCP figure (the entry has 'mtu')."""
    return f'tcp.best.{direction}_{tag}mbps'


def tcp_vs_best(direction, tag=''):
    """Ratio name: pcinet at MTU 65535 / virtio at its best MTU."""
    return f'tcp.mtu65535_vs_virtio_best.{direction}_{tag}mbps'


def bulk(side, what, mtu=None):
    """Doorbells/interrupts over the bulk TCP runs: side a or b, what one
    of BULK; per MTU when mtu is given."""
    return 'bulk.' + (f'mtu{mtu}.' if mtu else '') + f'{side}.{what}'


def bulk_both(what):
    """pcinet's doorbells or interrupts per packet, both sides together."""
    return f'bulk.{what}_per_packet'


BULK = {
    'doorbells_per_packet': 'doorbells/pkt',
    'interrupts_per_packet': 'interrupts/pkt',
    'events_per_packet': '(doorbells+interrupts)/pkt',
    'proc_interrupts_per_packet': '/proc/interrupts per pkt',
    'events_per_frame_equiv': '(d+i) per MTU frame',
}

# (name, label, unit), per link
UDP = (
    ('udp64.rx_pps', 'received, packets/s', 'packets/s'),
    ('udp64.tx_pps', 'sent, packets/s', 'packets/s'),
    ('udp64.loss_pct', 'loss, % (iperf3)', '%'),
    ('udp64.reached_receiver_pct', 'reached b\'s interface, % of sent', '% of sent'),
    ('udp64.receiver_rcvbuf_drop_pct', 'dropped at b\'s socket buffer, % of sent', '% of sent'),
    ('udp64.receiver_if_drop_pct', 'dropped by b\'s driver, % of sent', '% of sent'),
    ('udp64.sender_qdisc_drop_pct', 'dropped by a\'s qdisc, % of sent', '% of sent'),
    ('udp64.sender_if_drop_pct', 'dropped by a\'s driver, % of sent', '% of sent'),
)
LATENCY = (
    ('ping.p50_us', 'ping p50', 'us'),
    ('ping.p99_us', 'ping p99', 'us'),
    ('ping.avg_us', 'ping mean', 'us'),
    ('udp_rr.p50_us', 'sockperf p50', 'us'),
    ('udp_rr.p99_us', 'sockperf p99', 'us'),
    ('udp_rr.avg_us', 'sockperf mean', 'us'),
)
PING_REPLIES = 'ping.replies'

# The window copy bandwidth (pcinet-memcpy): its op -> (key prefix, label)
WINDOW = {
    'write_kernel': ('window.memcpy', 'RAM → window, kernel memcpy loop'),
    'read_kernel': ('window.read', 'window → RAM, kernel memcpy loop'),
    'write_movsb': ('window.movsb', 'RAM → window, rep movsb'),
    'write_glibc': ('window.glibc', 'RAM → window, glibc memcpy'),
    'ram_kernel': ('ram.memcpy', 'RAM → RAM, kernel memcpy loop'),
}
WINDOW_CHUNKS = {1500: '1500', 65536: '64k'}	# bytes -> name
WINDOW_UNIT = 'MB/s'


def window(prefix, chunk):
    """Window figure key: prefix from WINDOW, chunk in bytes."""
    return f'{prefix}_{WINDOW_CHUNKS[chunk]}_mbps'


WINDOW_REF = window('window.memcpy', 65536)	# what goodput is compared to

# ttyPCI (full keys, pcinet only)
TTY = (
    ('pcinet.tty.throughput_kBps', 'a→b throughput, kB/s', 'kB/s'),
    ('pcinet.tty.echo_rtt_p50_us', 'echo round trip p50, µs (1 byte)', 'us'),
    ('pcinet.tty.echo_rtt_p99_us', 'echo round trip p99, µs (1 byte)', 'us'),
)

# kprobes of the copy/checksum trace: event -> (function, length argument)
PROBES = {
    'skb_copy_bits': ('skb_copy_bits', '$arg4:s32'),
    'skb_store_bits': ('skb_store_bits', '$arg4:s32'),
    '__pskb_pull_tail': ('__pskb_pull_tail', '$arg2:s32'),
    'pskb_expand_head': ('pskb_expand_head', None),
    'skb_segment': ('skb_segment', None),
    'skb_copy_and_csum_bits': ('skb_copy_and_csum_bits', '$arg4:s32'),
    'csum_partial': ('csum_partial', '$arg2:s32'),
    '__skb_checksum': ('__skb_checksum', '$arg3:s32'),
    'skb_checksum_help': ('skb_checksum_help', None),
    '__skb_checksum_complete': ('__skb_checksum_complete', None),
}


def trace(name):
    """A copy/checksum trace summary figure name (see bench.trace_run)."""
    return f'trace.{name}'


# The storage section (bench.py --only storage): disks and folders as users
# serve them across the link today, and QEMU's own virtio-blk for scale.
# A figure's key is "<target>.<name>" with name from STORAGE, e.g.
# "nbd_pcinet.storage.seq_read_mbs".  Targets: name -> label; the last two
# are the virtio transport over pcinet, not built yet: empty columns.
STORAGE_TARGETS = {
    'nbd_pcinet': 'NBD over pcinet0',
    'ninep_pcinet': '9P/TCP over pcinet0',
    'virtio_blk': 'QEMU virtio-blk (reference)',
    'vblk_pcinet': 'virtio-blk over pcinet',
    'vfs_pcinet': 'virtio-fs over pcinet',
}
STORAGE_PENDING = ('vblk_pcinet', 'vfs_pcinet')	# not built yet
# fio jobs: name -> (label, fio arguments)
FIO_JOBS = {
    'seq_read': ('sequential read, 1 MiB, iodepth 8', '--rw=read --bs=1M --iodepth=8'),
    'seq_write': ('sequential write, 1 MiB, iodepth 8', '--rw=write --bs=1M --iodepth=8'),
    'rand_read': ('random read, 4 KiB, iodepth 32', '--rw=randread --bs=4k --iodepth=32'),
    'rand_write': ('random write, 4 KiB, iodepth 32', '--rw=randwrite --bs=4k --iodepth=32'),
    'lat_read': ('random read, 4 KiB, iodepth 1', '--rw=randread --bs=4k --iodepth=1'),
}
# (name, label, unit), per storage target
STORAGE = (
    ('storage.seq_read_mbs', 'sequential read, 1 MiB, iodepth 8, MB/s', 'MB/s'),
    ('storage.seq_write_mbs', 'sequential write, 1 MiB, iodepth 8, MB/s', 'MB/s'),
    ('storage.rand_read_iops', 'random read, 4 KiB, iodepth 32, IOPS', 'IOPS'),
    ('storage.rand_write_iops', 'random write, 4 KiB, iodepth 32, IOPS', 'IOPS'),
    ('storage.lat_read_p50_us', 'random read, 4 KiB, iodepth 1, p50 latency, µs', 'us'),
    ('storage.lat_read_p99_us', 'random read, 4 KiB, iodepth 1, p99 latency, µs', 'us'),
    ('storage.seq_read_cpu_a_s_per_gb', 'sequential read: CPU of a (server), s/GB', 's/GB'),
    ('storage.seq_read_cpu_b_s_per_gb', 'sequential read: CPU of b (client), s/GB', 's/GB'),
    ('storage.seq_write_cpu_a_s_per_gb', 'sequential write: CPU of a (server), s/GB', 's/GB'),
    ('storage.seq_write_cpu_b_s_per_gb', 'sequential write: CPU of b (client), s/GB', 's/GB'),
    ('storage.tar_mbs', 'tar copy of the tree onto the target, MB/s', 'MB/s'),
    ('storage.tar_files_per_s', 'tar copy of the tree onto the target, files/s', 'files/s'),
    ('storage.meta_create_per_s', 'metadata: create, files/s', 'files/s'),
    ('storage.meta_stat_per_s', 'metadata: stat, files/s', 'files/s'),
    ('storage.meta_unlink_per_s', 'metadata: unlink, files/s', 'files/s'),
)


def storage(name):
    """A storage figure name: 'storage.' + name (name without the prefix)."""
    return f'storage.{name}'


UNITS = {name: unit for name, _, unit in UDP + LATENCY + STORAGE}
UNITS.update({k: unit for k, _, unit in TTY})


def unit(name):
    """The unit of a figure name (or full key) from the tables above."""
    return UNITS.get(name) or UNITS.get(name.split('.', 1)[-1])


# The scaling section (bench.py --only scale): one guest with N links to N
# pcinet-peers (tests/qemu/scale.py).  One row per N; its fields:
# (name, label, unit).
SCALE_NS = (1, 2, 4, 8, 16, 19)
SCALE = (
    ('up_s', 'all up, s (insmod to the last carrier)', 's'),
    ('agg_mbps', 'aggregate TCP, Mbit/s (all links at once, received)', 'Mbit/s'),
    ('min_mbps', 'per link min, Mbit/s', 'Mbit/s'),
    ('max_mbps', 'per link max, Mbit/s', 'Mbit/s'),
    ('mem_drop_kib', 'MemAvailable drop, KiB', 'KiB'),
    ('mem_per_link_kib', 'MemAvailable drop per link, KiB', 'KiB'),
    ('idle_irqs_per_s', 'idle pcinet interrupts/s', '/s'),
)

# The chassis section (bench.py --only chassis): make chassis's host and 4
# boards (tests/qemu/chassis.py), TCP through the host's br0.  Figures of
# the section: (name, label, unit), each a median (min, max) of the
# repetitions.
CHASSIS_BOARDS = 4
CHASSIS = (
    ('b2b_mbps', 'board1 → board2 through the host\'s br0, Mbit/s', 'Mbit/s'),
    ('b2h_mbps', 'board1 → host (br0 10.77.0.254), Mbit/s', 'Mbit/s'),
    ('ring_agg_mbps', 'all 4 boards at once, each to the next: aggregate, Mbit/s',
     'Mbit/s'),
    ('ring_min_mbps', 'all at once: per pair min, Mbit/s', 'Mbit/s'),
    ('ring_max_mbps', 'all at once: per pair max, Mbit/s', 'Mbit/s'),
    ('ring_host_busy_pct', 'all at once: the host\'s CPU busy, % of its vCPU', '%'),
)
