#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, the reporting half: results/latest.json (written by
bench.py, which measures) -> latest.md and latest.png (gnuplot).  The
figures' keys and labels are bench/figures.py's, shared with bench.py.

    python3 bench/report.py [RESULTS.json] [--out DIR]

Without arguments it reads bench/results/latest.json and writes next to
it; bench.py calls it at the end of every run.  Nothing here boots a
machine: a report can be written again from saved results.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import figures as F  # noqa: E402
from figures import HOST_MTU, LABEL, LINKS, MTUS, PING_COUNT  # noqa: E402

T0 = time.monotonic()


def _gnuplot(script, tmp, path):
    """Run gnuplot on script, which writes tmp; tmp becomes path.
    Returns False (and says why) if gnuplot failed."""
    r = subprocess.run(['gnuplot'], input=script, text=True, capture_output=True)
    if r.returncode != 0 or not tmp.exists():
        progress('gnuplot failed: ' + r.stderr.strip()[:300])
        return False
    tmp.replace(path)
    return True


def progress(msg):
    t = int(time.monotonic() - T0)
    print(f'[{t // 60:2d}:{t % 60:02d}] {msg}', flush=True)


def fmt(v, unit=None):
    if v is None:
        return 'n/a'
    if isinstance(v, str):
        return v
    a = abs(v)
    if a >= 1000:
        s = f'{v:,.0f}'
    elif a >= 100:
        s = f'{v:.0f}'
    elif a >= 10:
        s = f'{v:.1f}'
    elif a >= 0.01 or a == 0:
        s = f'{v:.3f}' if a < 1 else f'{v:.2f}'
    else:
        s = f'{v:.2g}'
    return s


def cell(R, k):
    f = R.get(k)
    if f is None:
        return 'n/a'
    if isinstance(f, str):
        return f
    if f['n'] == 1:
        return fmt(f['median'])
    return f"{fmt(f['median'])} ({fmt(f['min'])}–{fmt(f['max'])})"


def ratio_cell(ratios, k):
    v = ratios.get(k)
    return f'{v:.2f}×' if v is not None else 'n/a'


def storage_md(R, w):
    """The storage section (bench.py measure_storage) into w()."""
    meta = R['meta']
    st = meta.get('storage', {})
    w('## Storage: disks and folders over TCP across pcinet0\n')
    if not any(F.key(t, k) in R for t in F.STORAGE_TARGETS if t not in F.STORAGE_PENDING
               for k, _, _ in F.STORAGE):
        w('Not measured in this run (`python3 bench/bench.py --only storage`).\n')
        return
    w('What users do today to give the board a disk or a folder of the host: a (the host) '
      'serves, b (the board) uses, over TCP on pcinet0 (10.77.0.x, MTU '
      f"{st.get('mtu', 65535)}). **NBD**: `qemu-storage-daemon` on a exports a "
      f"{st.get('mib', 128)} MiB image in a's tmpfs (file driver, aio=threads), "
      '`nbd-client -b 4096` on b (/dev/nbd0, one connection). **9P/TCP**: `diod -n` on a '
      "exports a directory of a's tmpfs, b mounts it with `mount -t 9p -o trans=tcp,"
      f"version=9p2000.L` (default cache=none; {st.get('9p_mount', '')}). **QEMU "
      'virtio-blk**: the reference, what a VM gets: a virtio-blk-pci disk of b backed by a '
      'raw file in the host\'s page cache (cache=writeback, aio=threads); a takes no part '
      '(its CPU is not counted, nor QEMU\'s own threads on the host). The last two columns '
      'are the virtio transport over pcinet, not built yet.\n')
    w(f"- plan: {meta.get('storage_plan', '')}. Figures: median (min–max) of the "
      'repetitions.')
    w(f"- fio ({st.get('fio', '')}) on b: `--direct=1 --ioengine=io_uring --time_based "
      f"--runtime={meta.get('storage_secs')} --ramp_time=1`, on /dev/nbd0, on a "
      f"{st.get('mib', 128)} MiB file on the 9P mount, on /dev/vda. Runs are short to keep the "
      'section near 6 minutes under TCG: figures move by some percent from run to run '
      '(see min–max). Latency: fio\'s completion latency percentiles (clat).')
    w('- CPU: guest busy seconds (user+nice+system+irq+softirq+steal, /proc/stat) per GB '
      'moved (fio\'s mean rate), over a window inside each sequential run (fio\'s start '
      'and ramp left out), on a (server) and b (client).')
    w(f"- folder: `tar -C /tmp -cf - src | tar -C DIR -xf -; sync` of a source-like tree "
      f"generated in b's tmpfs ({st.get('tree', '')}); then the metadata loop over "
      f"{meta.get('meta_files')} empty files: create (`: >f$i`, a dash builtin), stat "
      '(`[ -e f$i ]`, builtin), unlink (one `rm -f f*`), each phase timed from '
      '/proc/uptime (10 ms), a `sync` closing create and unlink.'
      + (' On NBD and virtio-blk the folder is an ext4 made on the device (mke2fs '
         'defaults, inode tables and journal written at mkfs time): its stats are answered from b\'s own caches, 9P (cache=none) asks a '
         'for each one.' if st.get('ext4') else ' On 9P only.') + '\n')
    cols = list(F.STORAGE_TARGETS)
    w('| figure | ' + ' | '.join(F.STORAGE_TARGETS[t] for t in cols) + ' |')
    w('|---|' + '---|' * len(cols))
    for k, lab, _ in F.STORAGE:
        w(f'| {lab} | ' + ' | '.join(cell(R, F.key(t, k)) for t in cols) + ' |')
    w('')


def ratio_table(w, sec, ratio_head):
    """A table of sec's figures per target (its labels' order), the ratio
    of the first target to the second and the issue's target."""
    figs, ratios = sec.get('figures', {}), sec.get('ratios', {})
    cols = list(sec.get('targets', {}))
    w('| figure | ' + ' | '.join(sec['targets'][t] for t in cols)
      + f' | {ratio_head} | target |')
    w('|---|' + '---|' * (len(cols) + 2))
    labels = sec.get('labels', {})
    for name in labels:
        cells = [cell(figs, f'{t}.{name}') for t in cols]
        if all(c == 'n/a' for c in cells):
            continue
        r = ratios.get(name)
        rc = f"{r['ratio']:.2f}×" if r else ''
        goal = (f"{'≥' if r['how'] == 'min' else '≤'} {r['goal']}×: "
                f"**{'met' if r['met'] else 'not met'}**" if r else '')
        w(f'| {labels[name]} | ' + ' | '.join(cells) + f' | {rc} | {goal} |')
    w('')


def labels_of(sec, name):
    """A figure's label without its unit."""
    return sec.get('labels', {}).get(name, name).rsplit(', ', 1)[0]


def virtio_md(R, w):
    """The virtio section (bench/virtio_route.py) into w()."""
    sec = R.get('virtio') or {}
    fs = sec.get('fs') or {}
    figs = sec.get('figures', {})
    w('## Virtio: the disk and the folder over pcinet against NBD and 9P over pcinet0, '
      'served from the host\n')
    if not sec.get('figures'):
        w('Not measured in this run (`python3 bench/bench.py --only virtio`).\n')
        return
    g = sec.get('guest', {})
    w(f"One board (QEMU, TCG, {g.get('vcpus', '?')} vCPU, {g.get('mem_kib', 0) // 1024} MiB) "
      'on a fabric `-m 64M -V 8M -n 4`; the other side of the link is `pcinet-peer --blk '
      '--fs` on this machine (its TAP in a network namespace). All the routes are measured '
      'in the same run, interleaved job by job.\n')
    w('### The disk\n')
    w('**virtio-blk over pcinet**: the stock `virtio_blk` on pcinet\'s virtio transport, '
      'served by the `qemu-storage-daemon` (vhost-user-blk export) pcinet-peer starts, on '
      'the fabric\'s memory. **NBD over pcinet0**: `nbd-client -b 4096` on the board (one '
      f"connection, MTU {sec.get('mtu')}) to a second `qemu-storage-daemon` (NBD export) "
      'listening on pcinet-peer\'s TAP. **Reference**: the board\'s own QEMU '
      '`virtio-blk-pci` disk (`cache=writeback,aio=threads`, as the storage section\'s), '
      'what a VM gets. The three: the file driver, a '
      f"{sec.get('mib')} MiB image of the same random bytes each, in the same directory, "
      'in this machine\'s page cache: the transport is the only difference.\n')
    w(f"- plan: {sec.get('plan', '')}. Figures: median (min–max) of the repetitions.")
    w(f"- fio ({g.get('fio', sec.get('fio', ''))}), {sec.get('qsd', '')}; the board\'s "
      f"disks {sec.get('devices', {})}; the pcinet disk's queue "
      f"(nr_tags, max_sectors_kb, max_segments): {sec.get('vda_queue', '?')}.")
    w('- board CPU: busy seconds from /proc/stat per GB over a window inside each '
      'sequential run; host CPU: utime+stime of the serving processes (virtio: pcinet-peer '
      'and its daemon; NBD: pcinet-peer, which moves the TAP\'s frames, and the NBD daemon) '
      'over the whole run, per GB at fio\'s mean rate over runtime + ramp (QEMU\'s own '
      'threads are in neither; none for the reference, whose QEMU process is the board\'s '
      'vCPU too).')
    w('- interrupts per I/O: the board\'s pcinet vectors in /proc/interrupts over the CPU '
      'window, divided by fio\'s I/Os in it (the doorbells the host rang; the reference: '
      'its virtio-pci request vectors).')
    w('- doorbells per I/O, over the same window: the link\'s counters on the board '
      '(`/sys/class/net/pcinet0/device/doorbells/`) for the route\'s channel. '
      'board→host: virtio-blk and virtio-fs `virtio_rung` (the transport\'s kicks), NBD '
      'and 9P `net_rung` (= ethtool -S `tx_doorbells` + `rx_space_doorbells`); '
      'host→board, received by the board: `virtio_received` (the back end\'s calls, '
      'pcinet-peer\'s status doorbells), `net_received`. None for the reference: no guest '
      'counter sees a virtio-pci notify. host: the kicks pcinet-peer forwarded to the '
      'back end (its status file, `vio_kicks`), over the whole fio run at fio\'s mean '
      'rate (as the host CPU); the back end\'s calls ring the board without pcinet-peer, '
      'so the board\'s count is the only one of them.\n')
    ratio_table(w, sec, 'virtio / NBD')
    w('Targets (issue 10): virtio ≥ 1.5× NBD in MB/s and IOPS, ≤ 0.7× its iodepth-1 '
      'latency. Under TCG the board\'s vCPU is the bottleneck of every route, so the '
      'ratios follow the board\'s CPU per byte (rows above): NBD pays the board\'s '
      'TCP/IP stack, the net channel\'s copy and pcinet-peer\'s TAP (and this machine\'s '
      'TCP stack) per request; virtio one bounce copy into the window and a doorbell, the '
      'back end reading the window itself; QEMU\'s disk no copy in the board at all '
      '(QEMU reads the guest\'s pages). On hardware the ratios will differ.\n')
    ref = []
    for name in ('seq_read_mbs', 'seq_write_mbs', 'rand_read_iops', 'rand_write_iops'):
        v, q = figs.get(f'vblk_peer.{name}'), figs.get(f'vblk_qemu.{name}')
        if v and q and q['median']:
            ref.append(f"{labels_of(sec, name)}: {v['median'] / q['median']:.2f}×")
    if ref:
        w('virtio-blk over pcinet against the reference (what a VM gets), medians: '
          + '; '.join(ref) + '.\n')
    w('Stage 3, the same disk served by pcinet-vhost in a host guest on the fabric (the '
      'route users deploy), has its own file: results/vhost.md (`make bench-vhost`).\n')
    w('### The folder\n')
    if not fs.get('figures'):
        w('Not measured in this run (see the errors).\n')
        return
    w('**virtio-fs over pcinet**: the stock `virtiofs` on pcinet\'s virtio transport, '
      'served by the `virtiofsd` pcinet-peer starts (its defaults: cache=auto, no '
      'writeback cache). **9P over pcinet0**: the kernel\'s 9p client '
      '(`trans=tcp,version=9p2000.L`, its default cache=none) to `diod` listening on '
      'pcinet-peer\'s TAP. Each exports a directory under /tmp on this machine with the '
      f"same files (fio\'s {fs.get('mib')} MiB file of random bytes, the tree\'s tar).\n")
    w(f"- plan: {fs.get('plan', '')}. Figures: median (min–max) of the repetitions.")
    w(f"- mounts: {'; '.join(f'`{m}`' for m in sec.get('fs_mounts', []))}; "
      f"{sec.get('fs_versions', '')}.")
    w('- fio: buffered I/O on both (virtiofsd offers no O_DIRECT by default), '
      '`--invalidate=1` and the board\'s `drop_caches` before each run, each run one '
      'pass over the file at most (`--size`, the random jobs with fio\'s random map, '
      '`--runtime` a cap): no byte is read twice, so no read comes from the board\'s page '
      'cache; writes go through to the server at once on both (no writeback cache). '
      'io_uring punts buffered writes of one file to one worker: the write jobs run at '
      'an effective iodepth of 1 on both routes.')
    w(f"- tar: the tree ({sec.get('tree', '')}) extracted with busybox tar from the "
      'board\'s tmpfs into the mount, then `sync`. Metadata loop: a busybox shell loop, '
      f"create (`: >f$i`) {fs.get('meta_files', 0):,} empty files then `sync`, stat "
      '(`[ -e f$i ]`) each, unlink them all (one `rm -f f*`, its readdir included) then '
      '`sync`; the board\'s caches dropped (not timed) before each phase, so each stat '
      'asks the server.')
    w('- board CPU: busy seconds from /proc/stat per GB from fio\'s exec_prerun to its '
      'exec_postrun; host CPU: utime+stime of pcinet-peer and virtiofsd, or pcinet-peer '
      'and diod, over the whole run, per GB moved; per I/O: as for the disk, over the '
      'same exec_prerun-to-exec_postrun window, divided by fio\'s I/Os (pcinet-peer\'s '
      'kicks: over the whole run).\n')
    ratio_table(w, fs, 'virtio-fs / 9P')
    w('Targets (issue 10): virtio-fs ≥ 1.5× 9P in MB/s and IOPS; tar and the metadata '
      'phases: a lower time (ratio ≤ 1). Both routes cost the board one request per '
      'operation through its FUSE or 9p client; the difference is the transport under '
      'it: virtio-fs one bounce copy into the window and a doorbell, 9P a TCP round trip '
      'through the board\'s TCP/IP stack, the net channel and pcinet-peer\'s TAP.\n')
    ff = fs.get('figures', {})
    missed = [n for n, r in fs.get('ratios', {}).items() if not r['met']]
    for name in missed:
        why = ''
        job = name.rsplit('_', 1)[0]
        cpu = [ff.get(f'{t}.{job}_board_s_per_gb') for t in ('vfs_peer', 'ninep_peer')]
        mbs = [ff.get(f'{t}.{job}_mbs') for t in ('vfs_peer', 'ninep_peer')]
        if all(cpu) and all(mbs):
            busy = [c['median'] * m['median'] / 1000 for c, m in zip(cpu, mbs)]
            irq = (ff.get(f'vfs_peer.{job}_irqs_per_io') or {}).get('median', 0)
            bound = ('both are bound by the board\'s CPU per byte' if min(busy) >= 0.9
                     else 'neither is quite bound by the board\'s CPU, but')
            why = (f" The board's vCPU is busy about {busy[0]:.0%} of the time on virtio-fs "
                   f"and {busy[1]:.0%} on 9P (board CPU s per GB × GB/s, rows above): {bound}, "
                   f"and virtio-fs\'s buffered {job.split('_')[1]} costs "
                   f"{cpu[0]['median']:.1f} s/GB against 9P's {cpu[1]['median']:.1f}: the "
                   'board\'s FUSE path over the page cache ('
                   + ('readahead split into several FUSE requests per MiB: '
                      f'{irq:.1f} interrupts per 1 MiB; pages filled from the bounce '
                      'pool, then copied to the user' if job == 'seq_read' else
                      f'{irq:.1f} interrupts per 1 MiB')
                   + ') rather than the transport, whose own costs are far lower (host '
                   'CPU and interrupts per I/O, rows above). Not a transport limit; the '
                   'board\'s FUSE path under TCG.')
        w(f"Not met: {labels_of(fs, name)} ({fs['ratios'][name]['ratio']:.2f}×).{why}\n")


def vhost_md(R, w):
    """The stage-3 section (bench/vhost_route.py) into w()."""
    sec = R.get('vhost') or {}
    figs = sec.get('figures', {})
    w('## Stage 3: the virtio disk served by pcinet-vhost on a host guest, against NBD '
      'over pcinet0 from the same guest\n')
    if not figs:
        w('Not measured in this run (`python3 bench/bench.py --only vhost`).\n')
        return
    g = sec.get('guest', {})
    w(f"Two guests (QEMU, TCG, {g.get('vcpus', '?')} vCPU, {g.get('mem_kib', 0) // 1024} "
      'MiB each) on one fabric `-m 64M -V 8M -n 4`: **a**, the host, runs the route users '
      'deploy, `pcinet-vhost --link pcinet0 --blk IMG` on the driver\'s '
      '`/dev/pcinet-vhost0` with the `qemu-storage-daemon` (vhost-user-blk export) it '
      'starts; **b**, the board, sees `/dev/vda` (the stock `virtio_blk` on pcinet\'s '
      'virtio transport). Against it, in the same run, interleaved job by job: '
      '`nbd-client -b 4096` on b (one connection, pcinet0 at MTU '
      f"{sec.get('mtu')}) to a second `qemu-storage-daemon` on a (NBD export). Both: "
      f"the file driver with `cache.direct=off`, a {sec.get('mib')} MiB image of the same "
      'random bytes on a\'s tmpfs: the route is the only difference. The setup is '
      'tests/qemu/test_vhost.py\'s (`started()`).\n')
    w(f"- plan: {sec.get('plan', '')}. Figures: median (min–max) of the repetitions.")
    w(f"- fio ({g.get('fio', sec.get('fio', ''))}), {sec.get('qsd', '')}, "
      f"{sec.get('nbd_client', '')}; the board\'s disks {sec.get('devices', {})}; "
      "/dev/vda's queue (nr_tags, max_sectors_kb, max_segments): "
      f"{sec.get('vda_queue', '?')}.")
    w('- back ends on a: ' + '; '.join(f'`{c}`' for c in sec.get('qsd_cmdlines', [])) + '.')
    w('- board CPU: b\'s busy seconds from /proc/stat per GB over a window inside each '
      'sequential run. Host guest a\'s CPU: a\'s busy seconds (its /proc/stat, sampled '
      'over the board\'s window by a sampler of its own, started just before the '
      'board\'s fio) per GB at fio\'s mean rate, and both guests\' busy share of their '
      'windows: '
      'a\'s kernel (doorbells and eventfds, or TCP/IP and the net channel) and '
      'qemu-storage-daemon. This machine\'s CPU: utime+stime of both guests\' QEMU '
      'processes over the whole fio run, per GB at fio\'s mean rate over runtime + '
      'ramp.')
    w('- interrupts per I/O: the board\'s pcinet vectors in /proc/interrupts over its '
      'CPU window, divided by fio\'s I/Os in it (the doorbells a rang); doorbells per '
      'I/O over the same window: the board\'s link counters '
      '(`/sys/class/net/pcinet0/device/doorbells/`) of the route\'s channel, '
      '`virtio_rung`/`virtio_received` for virtio, `net_rung`/`net_received` for NBD '
      '(runs before the counters existed have the net channel\'s ethtool count only).\n')
    ratio_table(w, sec, 'virtio / NBD')
    why = ('Targets (issue 10): virtio ≥ 1.5× NBD in MB/s and IOPS, ≤ 0.7× its iodepth-1 '
      'latency. Both guests run under TCG on the same 2-core machine (shared with other '
      'work: see the load above), so the host guest\'s vCPU is as much a part of each '
      'route\'s cost as the board\'s: NBD pays TCP/IP on both sides and the net '
      'channel\'s copies, virtio one bounce copy in the board, and in a no data path in '
      'the kernel or in pcinet-vhost: qemu-storage-daemon reads and writes the window\'s '
      'pools itself through `/dev/pcinet-vhost0`\'s memory file, kicked and calling '
      'through eventfds bound to the doorbells.')
    busy = []
    for job in ('seq_read', 'seq_write'):
        for t in sec.get('targets', {}):
            bb = figs.get(f'{t}.{job}_board_busy_pct')
            ab = figs.get(f'{t}.{job}_hostvm_busy_pct')
            if bb and ab:
                busy.append(f"{job.replace('_', ' ')} on {t.split('_')[0]}: board "
                            f"{bb['median']:.0f}%, host guest {ab['median']:.0f}%")
    if busy:
        why += (' Each vCPU\'s busy share of the window in the sequential runs '
                '(medians; rows above): ' + '; '.join(busy) + '.')
    hv = [figs.get(f'{t}.seq_read_hostvm_busy_pct') for t in sec.get('targets', {})]
    hs = [figs.get(f'{t}.seq_read_hostvm_s_per_gb') for t in sec.get('targets', {})]
    if len(hv) == 2 and all(hv) and all(hs) and min(x['median'] for x in hv) >= 85:
        why += (' The host guest\'s vCPU is the bottleneck of both routes (busy '
                f"{hv[0]['median']:.0f}% and {hv[1]['median']:.0f}% in sequential read), "
                'not the board\'s: the MB/s ratio follows a\'s CPU per byte, '
                f"{hs[1]['median']:.2f} s/GB for NBD against {hs[0]['median']:.2f} for "
                f"virtio ({hs[1]['median'] / hs[0]['median']:.1f}×): TCP/IP and the net "
                'channel\'s copies in a against qemu-storage-daemon serving the window '
                'directly. On hardware, with a host '
                'CPU that is not emulated, the ratios will differ.')
    w(why + '\n')
    try:
        v2 = json.loads((HERE / 'results/virtio.json').read_text())['virtio']
        v2f = v2['figures']
    except (OSError, ValueError, KeyError):
        v2f = None
    if v2f:
        cmp = []
        for name in ('seq_read_mbs', 'seq_write_mbs', 'rand_read_iops',
                     'rand_write_iops', 'lat_read_p50_us'):
            v3, v2v = figs.get(f'vblk_vhost.{name}'), v2f.get(f'vblk_peer.{name}')
            if v3 and v2v and v2v['median']:
                cmp.append(f"{labels_of(sec, name)}: {fmt(v3['median'])} against "
                           f"{fmt(v2v['median'])} ({v3['median'] / v2v['median']:.2f}×)")
        if cmp:
            w('Stage 3 against stage 2 (results/virtio.md, its own run: the same disk '
              'served by pcinet-peer on this machine, one guest only), virtio medians: '
              + '; '.join(cmp) + '. In stage 2 the device side runs natively on this '
              'machine; in stage 3 it runs in a TCG guest, whose vCPU bounds the '
              'sequential jobs (above).\n')
    met = [n for n, r in sec.get('ratios', {}).items() if r['met']]
    missed = [n for n, r in sec.get('ratios', {}).items() if not r['met']]
    w('Met: ' + (', '.join(f"{labels_of(sec, n)} ({sec['ratios'][n]['ratio']:.2f}×)"
                            for n in met) or 'none') + '. Not met: '
      + (', '.join(f"{labels_of(sec, n)} ({sec['ratios'][n]['ratio']:.2f}×)"
                   for n in missed) or 'none') + '.\n')
    note = sec.get('note')
    if note:
        w(note + '\n')


def scale_md(R, w):
    """The scaling section (bench.py scale_sweep) into w()."""
    sc = R.get('scale')
    w('## Scaling: one guest, N links to N pcinet-peers\n')
    if not sc:
        w('Not measured in this run (`python3 bench/bench.py --only scale`).\n')
        return
    g = sc.get('guest', {})
    w(f"One guest ({g.get('vcpus', '?')} vCPU, {g.get('mem_kib', 0) // 1024} MiB, TCG) with N "
      'ivshmem devices, one fabric each; the other side of each link is a `pcinet-peer` on '
      'this machine, its TAP in a network namespace of its own (tests/qemu/scale.py). '
      'One run per N. **all up**: guest seconds from `insmod` to the last carrier (every '
      'peer already running). **TCP**: iperf3 from every peer to the guest at once, MTU '
      "1500; each link's Mbit/s is what the guest's pcinet<i> received (rx_bytes, Ethernet "
      f"frames) over one common window of {sc.get('secs', '?')} s once every client runs (the "
      'clients start one after another; their own iperf3 figures are in scale.json); min '
      'and max are over the links (fairness). **MemAvailable drop**: the guest\'s, caches dropped, before `insmod` '
      'and after every link is up and has passed a ping (includes the module itself once). '
      "**idle interrupts**: the pcinet lines of the guest's /proc/interrupts over "
      f"{sc.get('idle_secs', 5)} s with nothing sent (IPv6 off on both sides).\n")
    rows = sc.get('rows', [])
    if rows:
        w('| N | ' + ' | '.join(lab for _, lab, _ in F.SCALE) + ' | min/max | idle irq/s per link |')
        w('|---|' + '---|' * (len(F.SCALE) + 2))
        for r in rows:
            w(f"| {r['n']} | " + ' | '.join(fmt(r.get(k)) for k, _, _ in F.SCALE)
              + f" | {fmt(r['min_mbps'] / r['max_mbps'] if r['max_mbps'] else None)}"
              + f" | {fmt(r['idle_irqs_per_s'] / r['n'])} |")
        w('')
        w('![scaling](scale.png)\n')
    for e in sc.get('errors', []):
        w('- error: ' + e.replace('\n', ' ')[:400])
    if sc.get('errors'):
        w('')


def chassis_md(R, w):
    """The chassis section (bench.py chassis_bench) into w()."""
    ch = R.get('chassis')
    w(f'## A chassis: a host and {F.CHASSIS_BOARDS} boards, board to board through '
      'the host\'s br0\n')
    if not ch or not ch.get('figures'):
        w('Not measured in this run (`python3 bench/bench.py --only chassis`).\n')
        for e in (ch or {}).get('errors', []):
            w('- error: ' + e.replace('\n', ' ')[:400])
        return
    g = ch.get('guest', {})
    w(f"`make chassis`'s machines (tests/qemu/chassis.py): a host and board1..board"
      f"{ch['boards']}, each {g.get('vcpus', '?')} vCPU and {g.get('mem_kib', 0) // 1024} MiB "
      'under TCG, one pcinet link (one pcinet-fabric) per board; the host bridges its '
      'pcinet0..3 in br0 (10.77.0.254), board K is 10.77.0.K; MTU '
      f"{g.get('mtu', '?')}. iperf3 TCP, 1 stream, {ch['secs']} s per run; the three "
      f"measurements take turns in each of {ch['reps']} repetitions; median (min–max). "
      '**board1 → board2** crosses two links and the host\'s bridge; **board1 → host** '
      '(br0\'s address) one link, for comparison. **all at once**: each board sends to the '
      f"next (1→2, 2→3, 3→4, 4→1) for {ch['secs'] + 2 * ch['warmup']} s; a pair's Mbit/s is "
      "what the host's bridge port towards its receiver sent over one common window of "
      f"{ch['secs']} s ({ch['warmup']} s after the start; Ethernet frames, with the ACKs of "
      'the receiver\'s own flow; the clients\' own iperf3 figures are in the JSON), the '
      'aggregate their sum, min and max over the pairs; the host\'s CPU busy share '
      '(user+nice+system+irq+softirq+steal, /proc/stat) over the same window. '
      'All figures are under TCG: the host\'s single vCPU forwards every packet between '
      'boards (both links\' copies and the bridge), so board-to-board throughput is '
      'bounded by it, not by the links; and the five guests share this machine\'s '
      f"{R['meta']['host'].get('cores', '?')} cores, so that vCPU does not have a core to "
      'itself (its busy share counts only the time it ran).\n')
    w('| figure | median (min–max) |')
    w('|---|---|')
    for k, lab, _ in F.CHASSIS:
        w(f"| {lab} | {cell(ch['figures'], k)} |")
    w('')
    w(f"Booted in {fmt(ch.get('boot_s'))} s; links up and br0 forwarding "
      f"{fmt(ch.get('up_s'))} s later.\n")
    for e in ch.get('errors', []):
        w('- error: ' + e.replace('\n', ' ')[:400])
    if ch.get('errors'):
        w('')


def write_scale_png(path, sc):
    """scale.png (gnuplot): the scaling rows against N."""
    rows = sc.get('rows', [])
    if not rows or not shutil.which('gnuplot'):
        progress('no scaling rows or no gnuplot: no scale.png')
        return False
    workdir = tempfile.mkdtemp(prefix='pcinet-report.')
    try:
        dat = Path(workdir) / 'scale.dat'
        cols = [k for k, _, _ in F.SCALE]
        dat.write_text('# n ' + ' '.join(cols) + '\n' + '\n'.join(
            ' '.join(str(r.get(k, 'NaN')) for k in ['n'] + cols) for r in rows) + '\n')
        c = {k: i + 2 for i, k in enumerate(cols)}
        tmp = Path(path).with_name(Path(path).name + '.tmp')
        top = max(r['n'] for r in rows) + 1
        script = f'''
set terminal pngcairo size 1500,480 font "sans,10"
set output "{tmp}"
set multiplot layout 1,3 title "One guest, N links to N pcinet-peers (TCG)"
set xlabel "links (N)"
set xrange [0:{top}]
set grid ytics
set key below
set title "TCP, all links sending at once"
set ylabel "Mbit/s"
set yrange [0:*]
plot "{dat}" using 1:{c['agg_mbps']} with linespoints lw 2 pt 7 title "aggregate", \\
     "{dat}" using 1:{c['max_mbps']} with linespoints lw 2 pt 9 title "per link max", \\
     "{dat}" using 1:{c['min_mbps']} with linespoints lw 2 pt 11 title "per link min"
set title "Bring-up and idle cost"
set ylabel "seconds, insmod to the last carrier"
set y2label "pcinet interrupts/s at idle"
set y2range [0:*]
set ytics nomirror
set y2tics
plot "{dat}" using 1:{c['up_s']} with linespoints lw 2 pt 7 title "all up (s)", \\
     "{dat}" using 1:{c['idle_irqs_per_s']} axes x1y2 with linespoints lw 2 pt 5 title "idle interrupts/s"
unset y2label
unset y2tics
set ytics mirror
set title "Guest memory"
set ylabel "KiB"
plot "{dat}" using 1:{c['mem_drop_kib']} with linespoints lw 2 pt 7 title "MemAvailable drop", \\
     "{dat}" using 1:{c['mem_per_link_kib']} with linespoints lw 2 pt 5 title "per link"
unset multiplot
'''
        return _gnuplot(script, tmp, path)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_lines(w, hi, gi, git):
    """The commit, machine and QEMU lines every report opens with."""
    w(f"- commit: `{git['describe']}` ({git['subject']})"
      + (f"; uncommitted changes in: {', '.join(git['modified'])}" if git['modified'] else ''))
    w(f"- machine: {hi['cpu']}, {hi['cores']} cores, {hi.get('mem_gib', '?')} GiB, {hi['os']}, "
      f"kernel {hi['kernel']}")
    w(f"- QEMU: {hi['qemu']}, TCG, `-cpu max`; both guests: {gi.get('vcpus')} vCPU, "
      f"{gi.get('mem_kib', 0) // 1024} MiB, kernel {gi.get('kernel')}")


def write_md(path, R):
    """latest.md from the results document R (latest.json); for a run of
    one section (bench.py --only) that section alone."""
    if R['meta'].get('only'):
        return write_section_md(path, R)
    meta = R['meta']
    ratios = R['ratios']
    runs, trace = R.get('runs', []), R.get('trace', {})
    errors, notes = R.get('errors', []), R.get('notes', {})
    L = []
    w = L.append
    w('# pcinet benchmark: pcinet against virtio-net over `-netdev stream`\n')
    hi, gi, git = meta['host'], meta['guest'], meta['git']
    w(f"- date: {meta['date']}; total run time {meta['run_time_min']:.1f} min")
    run_lines(w, hi, gi, git)
    w(f"- links in the same pair of guests: pcinet (ivshmem-doorbell + pcinet-fabric, 16 MiB window; "
      f"{gi.get('pcinet_napi', '')}) and virtio-net-pci over `-netdev stream` (unix socket, "
      f"host_mtu={HOST_MTU}, guest {gi.get('virtio_maxmtu', '')})")
    w(f"- offloads: pcinet0 `{gi.get('pcinet_features', '')}`; virtio eth0 "
      f"`{gi.get('virtio_features', '')}`")
    w(f"- tools: {gi.get('iperf3', '')}; {gi.get('sockperf', '')}")
    w(f"- plan: {meta['plan']}. Figures: median (min–max) of {meta['reps']} repetitions.")
    w(f"- noise: host load average {meta['load_start']} at start, {meta['load_end']} at end; "
      f"{meta['other_qemus']} other QEMU processes were running when the bench started "
      '(the machine is shared; TCG guests compete for its cores).')
    w('')
    w('## Targets\n')
    w('| target | measured | want | met |')
    w('|---|---|---|---|')
    for t in R['targets']:
        met = {True: 'yes', False: '**no**', None: 'n/a'}[t['met']]
        d = f" ({t['detail']})" if t['detail'] else ''
        w(f"| {t['target']} | {fmt(t['value'])}{d} | {t['want']} | {met} |")
    w('')
    w('## TCP throughput (iperf3, Mbit/s)\n')
    w('tx = a→b, rx = b→a (iperf3 -R); 1 stream and 4 parallel streams (4×). '
      'CPU: guest busy seconds per GB sent on the link (sender / receiver), '
      'from /proc/stat (user+nice+system+irq+softirq+steal).\n')
    w('| MTU | dir | pcinet | virtio-net/stream | ratio | pcinet CPU s/GB snd / rcv | '
      'virtio CPU s/GB snd / rcv |')
    w('|---|---|---|---|---|---|---|')
    for m in MTUS:
        for tag, sl in (('', '1×'), ('p4_', '4×')):
            for d in ('tx', 'rx'):
                k = F.tcp(m, d, tag)
                cp = [cell(R, F.key(l, F.tcp(m, d, tag, f'cpu_{r}_s_per_gb')))
                      for l in LINKS for r in ('sender', 'receiver')]
                w(f'| {m} | {d} {sl} | {cell(R, "pcinet." + k)} | {cell(R, "virtio_stream." + k)} | '
                  f'{ratio_cell(ratios, k)} | {cp[0]} / {cp[1]} | {cp[2]} / {cp[3]} |')
    best = [R.get(F.key('virtio_stream', F.tcp_best(d))) for d in F.DIRS]
    if all(best):
        w(f"\nvirtio-net/stream's best MTU: tx {best[0]['mtu']}, rx {best[1]['mtu']}. "
          f"pcinet MTU 65535 ÷ virtio best: tx {ratio_cell(ratios, F.tcp_vs_best('tx'))}, "
          f"rx {ratio_cell(ratios, F.tcp_vs_best('rx'))} (4 streams: "
          f"{ratio_cell(ratios, F.tcp_vs_best('tx', 'p4_'))}, "
          f"{ratio_cell(ratios, F.tcp_vs_best('rx', 'p4_'))}).")
    w('\n![throughput against MTU](latest.png)\n')
    def thr(k):
        # pcinet with threaded NAPI: its cell and its ratio to virtio
        t, v = R.get('pcinet_threaded.' + k), R.get('virtio_stream.' + k)
        r = (f"{t['median'] / v['median']:.2f}×" if t and v and v['median'] else 'n/a')
        return f"{cell(R, 'pcinet_threaded.' + k)} | {r}"

    w('## The cost of the per-record CRC (TCP a→b, 1 stream)\n')
    w('pcinet with its default CRC-32C per record (ethtool private flag `integrity` on) and '
      'with it off on both guests, measured in the same repetitions. The "pcinet" column here '
      'adds these runs to the main table\'s a→b runs at the same MTU.\n')
    w('| MTU | pcinet, CRC on | pcinet, CRC off | on/off | sender CPU s/GB on | off |')
    w('|---|---|---|---|---|---|')
    for mtu in (1500, 65535):
        k = F.tcp(mtu, 'tx')
        on, off = R.get('pcinet.' + k), R.get('pcinet_nocrc.' + k)
        r = f"{on['median'] / off['median']:.2f}×" if on and off and off['median'] else 'n/a'
        c = F.tcp(mtu, 'tx', '', 'cpu_sender_s_per_gb')
        w(f"| {mtu} | {cell(R, 'pcinet.' + k)} | {cell(R, 'pcinet_nocrc.' + k)} | {r} | "
          f"{cell(R, 'pcinet.' + c)} | {cell(R, 'pcinet_nocrc.' + c)} |")
    w('')
    w('## UDP, 64-byte payloads, unlimited rate (iperf3 -u -l 64 -b 0, a→b, MTU 1500)\n')
    w('pcinet runs with its default softirq NAPI, and again with threaded NAPI '
      '(`echo 1 >/sys/class/net/pcinet0/threaded` on both guests), the choice for a small '
      'receiver flooded by a faster peer.\n')
    w('| figure | pcinet | virtio-net/stream | ratio | pcinet, threaded NAPI | ratio |')
    w('|---|---|---|---|---|---|')
    for k, lab, _ in F.UDP:
        w(f'| {lab} | {cell(R, "pcinet." + k)} | {cell(R, "virtio_stream." + k)} | '
          f'{ratio_cell(ratios, k)} | {thr(k)} |')
    w('')
    w('## Latency (MTU 1500, µs)\n')
    w(f'ping: busybox `ping -A` (next request when the reply arrives), {PING_COUNT} requests per '
      'repetition, ICMP answered by the peer kernel. sockperf: `sockperf ping-pong -m 64 '
      '--full-rtt`, UDP, user space to user space, 3 s per repetition.\n')
    w('| figure | pcinet | virtio-net/stream | ratio | pcinet, threaded NAPI | ratio |')
    w('|---|---|---|---|---|---|')
    for k, lab, _ in F.LATENCY:
        w(f'| {lab} | {cell(R, "pcinet." + k)} | {cell(R, "virtio_stream." + k)} | '
          f'{ratio_cell(ratios, k)} | {thr(k)} |')
    w('')
    w('## Doorbells and interrupts per packet under bulk TCP\n')
    w('From `ethtool -S pcinet0` deltas on each side over each TCP run: doorbells = '
      'tx_doorbells + rx_space_doorbells (rung by that side), interrupts = interrupts '
      '(taken by it), packets = tx_packets + rx_packets (ring records: a TSO/GSO record '
      'carries up to 64 KiB, at every MTU). /proc/interrupts of the pcinet vectors is the '
      'cross-check. virtio: interrupts of virtio0 per frame (frames are MTU-sized: the stream '
      'backend has no offloads), for scale only.\n')
    w('The last column but one divides the same events by the number of MTU-sized frames the '
      'bytes would have taken on a wire ((tx_bytes + rx_bytes) / MTU): a looser reading of '
      '"per packet", for comparison only; the target is judged per ring record.\n')
    w('| scope | side | doorbells/pkt | interrupts/pkt | (doorbells+interrupts)/pkt | '
      '/proc/interrupts per pkt | (d+i) per MTU frame | virtio irqs/pkt |')
    w('|---|---|---|---|---|---|---|---|')
    def bulk(link, n, what, mtu=None):
        return cell(R, F.key(link, F.bulk(n, what, mtu)))
    for n in ('a', 'b'):
        w(f'| all bulk runs | {n} | {bulk("pcinet", n, "doorbells_per_packet")} | '
          f'{bulk("pcinet", n, "interrupts_per_packet")} | '
          f'{bulk("pcinet", n, "events_per_packet")} | '
          f'{bulk("pcinet", n, "proc_interrupts_per_packet")} | | '
          f'{bulk("virtio_stream", n, "interrupts_per_packet")} |')
    for m in MTUS:
        for n in ('a', 'b'):
            w(f'| MTU {m} | {n} | | | {bulk("pcinet", n, "events_per_packet", m)} | | '
              f'{bulk("pcinet", n, "events_per_frame_equiv", m)} | '
              f'{bulk("virtio_stream", n, "interrupts_per_packet", m)} |')
    pr = [r for r in runs if r['link'] == 'pcinet' and r['side']['a']['packets']]
    if pr:
        w('\nPer run (last repetition):\n')
        w('| MTU | dir | streams | Mbit/s | a: pkts, doorbells, irqs | b: pkts, doorbells, irqs |')
        w('|---|---|---|---|---|---|')
        last = max(r['rep'] for r in pr)
        for r in pr:
            if r['rep'] != last:
                continue
            sa, sb = r['side']['a'], r['side']['b']
            w(f"| {r['mtu']} | {r['dir']} | {r['streams']} | {r['mbps']:.0f} | "
              f"{sa['packets']}, {sa['doorbells']}, {sa['interrupts']} | "
              f"{sb['packets']}, {sb['doorbells']}, {sb['interrupts']} |")
    w('')
    w('## The raw limit: copying into the shared window (MB/s)\n')
    w('`pcinet-memcpy` in guest a, through BAR2 mapped from sysfs, into the unused tail of '
      f"the peer's data inbox ({meta.get('memcpy_area', '?')}), records laid out like "
      'the ring (16-byte header, payload, 64-byte alignment), while the link is up but idle. '
      'The kernel loop is the one the guest kernel\'s memcpy() runs (memcpy_orig: this TCG '
      'CPU has ERMS but not FSRM) — what skb_copy_bits()/skb_store_bits() do to and from the '
      'ring. `rep movsb` is what copy_{from,to}_user() use on it (ERMS).\n')
    w('| copy | 1500 B | 64 KiB |')
    w('|---|---|---|')
    for k, lab in F.WINDOW.values():
        w(f'| {lab} | ' + ' | '.join(cell(R, F.window(k, c)) for c in F.WINDOW_CHUNKS) + ' |')
    wm = R.get(F.WINDOW_REF)
    if wm:
        w(f"\npcinet goodput as a fraction of the window copy bandwidth "
          f"({fmt(wm['median'])} MB/s = {fmt(wm['median'] * 8)} Mbit/s; pcinet copies records "
          'of up to 64 KiB at every MTU):\n')
        w('| MTU | tx 1× | rx 1× | tx 4× | rx 4× |')
        w('|---|---|---|---|---|')
        for m in MTUS:
            w(f'| {m} | ' + ' | '.join(cell(R, F.key('pcinet', F.tcp(m, d, t, 'window_fraction')))
                                       for t in F.STREAMS.values() for d in F.DIRS) + ' |')
    w('')
    w('## ttyPCI\n')
    if meta.get('guest', {}).get('tty'):
        w('| figure | value |')
        w('|---|---|')
        for k, lab, _ in F.TTY:
            w(f'| {lab} | {cell(R, k)} |')
    else:
        w('n/a: /dev/ttyPCI0 does not exist in the guests after `insmod pcinet.ko` '
          '(the tty front-end is not in this tree yet).')
    w('')
    w('## Copies and checksums: kprobe counts during one bulk run\n')
    w('kprobes on every skb copy and software-checksum function, with a hist trigger keyed '
      'on the caller (`caller=+0($stack)`, summing the length argument), armed on both guests '
      'during one 3 s iperf3 run a→b at MTU 1500 per link (probes slow the guests; these runs '
      'are not throughput figures). The kernel\'s memcpy itself cannot be probed (it is on '
      'the kprobe blacklist; registering a probe on csum_partial_copy_generic fails too), so '
      'copies are counted at the skb functions that call memcpy, and copy-with-checksum at '
      'skb_copy_and_csum_bits. "link bytes": the interface\'s tx_bytes on a, rx_bytes on b.\n')
    for link in LINKS:
        t = trace.get(link)
        if not t:
            w(f'{LABEL[link]}: not measured.\n')
            continue
        w(f"**{LABEL[link]}** ({t['mbps_with_probes']:.0f} Mbit/s with the probes armed; "
          f"a sent {t['net']['a']['tx_packets']} packets / {t['net']['a']['tx_bytes']:,} bytes, "
          f"b received {t['net']['b']['rx_packets']} / {t['net']['b']['rx_bytes']:,}):\n")
        w('| side | function | caller | calls | bytes | calls/pkt | bytes/link byte |')
        w('|---|---|---|---|---|---|---|')
        for side, fb, fp in (('a', 'tx_bytes', 'tx_packets'), ('b', 'rx_bytes', 'rx_packets')):
            nb, npk = t['net'][side][fb], t['net'][side][fp]
            any_row = False
            for ev in F.PROBES:
                for row in t['hist'].get(side, {}).get(ev, []):
                    any_row = True
                    by = row['bytes']
                    w(f"| {side} | {ev} | {row['caller']} | {row['calls']} | "
                      f"{'' if by is None else f'{by:,}'} | "
                      f"{row['calls'] / npk if npk else 0:.3f} | "
                      f"{'' if by is None or not nb else f'{by / nb:.3f}'} |")
            if not any_row:
                w(f'| {side} | (none) | | 0 | 0 | 0 | 0 |')
        s = t['summary']
        w('')
        w('Summary: ' + '; '.join(
            f'{k} {fmt(v) if isinstance(v, float) else v}' for k, v in s.items() if v is not None) + '.\n')
    if notes.get('trace'):
        w('Probes that could not be set: ' + '; '.join(notes['trace']).replace('\n', ' ') + '\n')
    storage_md(R, w)
    scale_md(R, w)
    chassis_md(R, w)
    w('## Notes\n')
    w('- Cut to fit 20 minutes on 2 cores: UDP and latency are measured at MTU 1500 only '
      '(64-byte payloads and pings do not depend on the MTU); UDP one direction (a→b); the '
      'copy/checksum trace is one run per link at MTU 1500; memcpy in one guest (both are '
      f'the same machine model). TCP runs are {meta["secs"]} s without an omitted warm-up '
      'second.')
    w('- Both guests run under TCG: every number is the emulator\'s speed on this host, not '
      'hardware\'s. Copies with `rep movsb` (all user copies, ERMS) are ~10× slower than the '
      'kernel\'s memcpy loop under TCG (see the window table), which bounds both links alike.')
    w('- virtio-net over `-netdev stream` has no vnet header: the device offers neither '
      'checksum offload nor TSO, so the guest segments and checksums in software (see '
      'the trace: on the sender skb_segment copies every segment with '
      'skb_copy_and_csum_bits, on the receiver csum_partial checks every frame).')
    if errors:
        w('- Errors during the run:')
        for e in errors:
            w('    - ' + e.replace('\n', ' ')[:400])
    if meta.get('splats'):
        w('- Kernel splats on the guest consoles: ' + '; '.join(meta['splats'][:5]))
    w('')
    w('Raw data: latest.json (each figure: median, min, max, n, unit, reps; `ratios`: '
      'pcinet ÷ virtio for every matching figure; `targets`).')
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text('\n'.join(L) + '\n')
    tmp.replace(path)


def write_section_md(path, R):
    """<section>.md of a bench.py --only run."""
    meta = R['meta']
    errors = R.get('errors', [])
    L = []
    w = L.append
    w(f"# pcinet benchmark, one section: {meta['only']}\n")
    hi, gi, git = meta['host'], meta.get('guest', {}), meta['git']
    w(f"- date: {meta['date']}; total run time {meta['run_time_min']:.1f} min "
      f"(`python3 bench/bench.py --only {meta['only']}`)")
    run_lines(w, hi, gi, git)
    w(f"- noise: host load average {meta['load_start']} at start, {meta['load_end']} at end; "
      f"{meta['other_qemus']} other QEMU processes were running when the bench started.")
    w('')
    if meta['only'] == 'storage':
        storage_md(R, w)
    elif meta['only'] == 'scale':
        scale_md(R, w)
    elif meta['only'] == 'chassis':
        chassis_md(R, w)
    elif meta['only'] == 'virtio':
        virtio_md(R, w)
    elif meta['only'] == 'vhost':
        vhost_md(R, w)
    elif meta['only'] == 'ntb':
        import ntb_route
        ntb_route.ntb_md(R, w)
    if errors:
        w('Errors during the run:\n')
        for e in errors:
            w('- ' + e.replace('\n', ' ')[:400])
        w('')
    if meta.get('splats'):
        w('Kernel splats on the guest consoles: ' + '; '.join(meta['splats'][:5]) + '\n')
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text('\n'.join(L) + '\n')
    tmp.replace(path)


def write_png(path, R):
    """latest.png (gnuplot) from the results document R."""
    if not shutil.which('gnuplot'):
        progress('gnuplot missing: no chart')
        return False
    workdir = tempfile.mkdtemp(prefix='pcinet-report.')
    try:
        return _write_png(Path(path), R, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _write_png(path, R, workdir):
    dat = Path(workdir) / 'mtu.dat'
    rows = []
    top = 0
    for m in MTUS:
        row = [str(m)]
        for tag in F.STREAMS.values():
            for link in LINKS:
                for d in F.DIRS:
                    f = R.get(F.key(link, F.tcp(m, d, tag)))
                    row += [str(f['median']), str(f['min']), str(f['max'])] if f else ['NaN'] * 3
                    top = max(top, f['max'] if f else 0)
        rows.append(' '.join(row))
    dat.write_text('# mtu, then median min max of: 1 stream pcinet tx, rx, virtio tx, rx; '
                   '4 streams the same\n' + '\n'.join(rows) + '\n')
    tmp = path.with_name(path.name + '.tmp')

    def panel(title, col):
        c = col
        return f'''
set title "{title}"
plot "{dat}" using 1:{c}:{c + 1}:{c + 2} with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "pcinet a->b", \\
     "{dat}" using 1:{c + 3}:{c + 4}:{c + 5} with yerrorlines lw 2 pt 5 dt 2 lc rgb "#1f77b4" title "pcinet b->a", \\
     "{dat}" using 1:{c + 6}:{c + 7}:{c + 8} with yerrorlines lw 2 pt 7 lc rgb "#d62728" title "virtio-net/stream a->b", \\
     "{dat}" using 1:{c + 9}:{c + 10}:{c + 11} with yerrorlines lw 2 pt 5 dt 2 lc rgb "#d62728" title "virtio-net/stream b->a"
'''
    script = f'''
set terminal pngcairo size 1280,560 font "sans,10"
set output "{tmp}"
set multiplot layout 1,2 title "TCP throughput against MTU (iperf3; median of the repetitions, bars: min-max)"
set xlabel "MTU (bytes)"
set ylabel "Mbit/s"
set logscale x 2
set xrange [1100:90000]
set xtics ("1500" 1500, "9000" 9000, "65535" 65535)
set yrange [0:{max(100, top * 1.35):.0f}]
set key top left
set grid ytics
''' + panel('1 stream', 2) + panel('4 parallel streams', 14) + 'unset multiplot\n'
    return _gnuplot(script, tmp, path)


def write(doc, out):
    """latest.md and latest.png in out from the results document doc (for
    a run of one section, bench.py --only: <section>.md alone); returns the
    path of the markdown."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    only = doc['meta'].get('only')
    if only:
        write_md(out / f'{only}.md', doc)
        return out / f'{only}.md'
    write_png(out / 'latest.png', doc)
    write_md(out / 'latest.md', doc)
    return out / 'latest.md'


def main(argv=None):
    ap = argparse.ArgumentParser(description='pcinet bench report from saved results')
    ap.add_argument('results', nargs='?', default=str(HERE / 'results/latest.json'))
    ap.add_argument('--out', help='directory for latest.md and latest.png '
                    '(default: the results file\'s)')
    args = ap.parse_args(argv)
    src = Path(args.results)
    try:
        doc = json.loads(src.read_text())
    except (OSError, ValueError) as e:
        print(f'report: {src}: {e}', file=sys.stderr)
        return 1
    md = write(doc, args.out or src.parent)
    progress(f'wrote {md}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
