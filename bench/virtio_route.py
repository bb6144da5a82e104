# SPDX-License-Identifier: GPL-2.0-only
"""bench.py --only virtio: the virtio disk over pcinet against NBD over
TCP on the same link, both served from this machine (issue 10, stage 2).

    +------- board (QEMU) -------+  pcinet-fabric  +---- host, netns pnv-<pid> -----+
    | /dev/vda  virtio_blk       |<===============>| pcinet-peer --blk vio.raw       |
    |   (pcinet's transport)     |  -m 64M -V 8M   |   qemu-storage-daemon, vhost-   |
    | /dev/nbd0 nbd-client       |  -n 4           |   user-blk (its own, native)    |
    |   pcinet0 10.77.0.1        |                 | TAP pnv0 10.77.0.2: qemu-       |
    +----------------------------+                 |   storage-daemon NBD, nbd.raw   |
                                                   +---------------------------------+

One board, one pcinet-peer: the disk is either the virtio channel's
(virtio_blk -> window -> qemu-storage-daemon's vhost-user-blk export) or an
NBD device over TCP on pcinet0 -> pcinet-peer's TAP -> a second
qemu-storage-daemon's NBD export.  Both back ends are the same program
with the same block driver options (file, its default aio=threads and
page cache) on an image of the same size and bytes in the same
directory: the transport is the only difference.  (Two images: each
daemon takes the image's write lock.)

Each figure is the median of args.reps repetitions of bench.py's fio jobs
(figures.FIO_JOBS), the two routes interleaved job by job.  Besides fio's
own figures, per run:
  - the board's CPU busy seconds per GB (sequential jobs), /proc/stat
    over a window inside the run (fio's start and ramp left out);
  - the host's CPU seconds per GB (sequential jobs) of the processes that
    serve the route (pcinet-peer and its back end for virtio; pcinet-peer,
    which moves the TAP's frames, and the NBD daemon for NBD), from
    /proc/<pid>/stat over the whole fio run, divided by what fio moved at
    its mean rate over runtime + ramp;
  - the board's interrupts per I/O, every pcinet vector of
    /proc/interrupts over the same window as its CPU: the doorbells the
    host rang; and for NBD the doorbells the board rang (ethtool -S
    pcinet0); virtio's kicks have no counter in the driver.
"""

import json
import math
import os
import shutil
import subprocess
import time

import pcinet_harness as h
import figures as F
from peer_lib import BlkPeer, sh

TARGETS = {'vblk_peer': 'virtio-blk over pcinet (pcinet-peer)',
           'nbd_peer': 'NBD over pcinet0 (pcinet-peer\'s TAP)'}
BOARD_IP, HOST_IP = '10.77.0.1', '10.77.0.2'
MTU = 65521			# a TAP's largest (test_peer.py, peer-mtu)
NBD_PORT = 10809
MIB = 128			# both images, as the storage section's
FIO_RAMP = 1
CLK_TCK = os.sysconf('SC_CLK_TCK')
TOPOLOGY = dict(machines=('a',), links=[('a',)], fabric_size='64M',
                fabric_vio='8M', vectors=4)
# (figure, label, unit) per target; the ratio rows and their targets
FIGURES = (
    ('seq_read_mbs', 'sequential read, 1 MiB, iodepth 8', 'MB/s'),
    ('seq_write_mbs', 'sequential write, 1 MiB, iodepth 8', 'MB/s'),
    ('rand_read_iops', 'random read, 4 KiB, iodepth 32', 'IOPS'),
    ('rand_write_iops', 'random write, 4 KiB, iodepth 32', 'IOPS'),
    ('lat_read_p50_us', 'random read, 4 KiB, iodepth 1: p50 latency', 'µs'),
    ('lat_read_p99_us', 'random read, 4 KiB, iodepth 1: p99 latency', 'µs'),
    ('seq_read_board_s_per_gb', 'sequential read: board CPU s per GB', 's/GB'),
    ('seq_write_board_s_per_gb', 'sequential write: board CPU s per GB', 's/GB'),
    ('seq_read_host_s_per_gb', 'sequential read: host CPU s per GB (serving '
     'processes)', 's/GB'),
    ('seq_write_host_s_per_gb', 'sequential write: host CPU s per GB (serving '
     'processes)', 's/GB'),
) + tuple(
    (f'{job}_{what}_per_io', f'{F.FIO_JOBS[job][0]}: {lab} per I/O', '/I/O')
    for what, lab in (('irqs', 'board interrupts'),
                      ('doorbells', 'board doorbells (net channel, ethtool)'))
    for job in F.FIO_JOBS)
# figure -> (wanted virtio/NBD ratio, 'min' or 'max'): the targets
GOALS = {'seq_read_mbs': (1.5, 'min'), 'seq_write_mbs': (1.5, 'min'),
         'rand_read_iops': (1.5, 'min'), 'rand_write_iops': (1.5, 'min'),
         'lat_read_p50_us': (0.7, 'max'), 'lat_read_p99_us': (0.7, 'max')}

# the board's counters: the uptime and /proc/stat's cpu line first, read by
# dash builtins (no fork between them: the window is the uptimes'
# difference), then every pcinet vector and the net doorbells
SNAP = ('{ read u _ </proc/uptime; read c </proc/stat; echo "up $u"; echo "$c"; '
        'echo "irq $(grep pcinet /proc/interrupts | '
        'awk \'{for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i} '
        'END {print n + 0}\')"; ethtool -S pcinet0 2>/dev/null | '
        'awk \'/ (tx_doorbells|rx_space_doorbells):/ {n += $2} '
        'END {print "db", n + 0}\'; }')


class BenchError(Exception):
    pass


def run(vm, cmd, timeout=60):
    rc, out = vm.sh(cmd, timeout)
    if rc != 0:
        raise BenchError(f'{vm.name}: `{cmd[:120]}` exited {rc}:\n{out[-1500:]}')
    return out


def parse_snap(text):
    s = {}
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == 'cpu':
            s['cpu'] = [int(x) for x in f[1:]]
        elif len(f) == 2 and f[0] in ('irq', 'db'):
            s[f[0]] = int(f[1])
        elif len(f) == 2 and f[0] == 'up':
            s['up'] = float(f[1])
    if len(s) != 4:
        raise BenchError(f'board counters not understood:\n{text[-300:]}')
    return s


def busy_s(c0, c1):
    """Busy seconds (user+nice+system+irq+softirq+steal) between two cpu
    lines of /proc/stat (USER_HZ 100)."""
    d = [b - a for a, b in zip(c0, c1)] + [0] * 8
    return (d[0] + d[1] + d[2] + d[5] + d[6] + d[7]) / 100


def proc_cpu_s(pids):
    """utime + stime of the processes pids (every thread), seconds."""
    total = 0
    for pid in pids:
        try:
            text = open(f'/proc/{pid}/stat').read()
        except OSError:
            continue
        f = text[text.rindex(')') + 2:].split()
        total += int(f[11]) + int(f[12])	# fields 14 and 15
    return total / CLK_TCK


def children(pid):
    try:
        with open(f'/proc/{pid}/task/{pid}/children') as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class Route:
    """The board, pcinet-peer --blk and the NBD daemon; the fio runs."""

    def __init__(self, args, progress):
        self.args = args
        self.progress = progress
        self.topo = self.peer = self.nbd = None
        self.wd = None
        self.raw = {}
        self.runs = []
        self.info = {}

    def up(self):
        env = h.load_env()
        wd = self.wd = h.make_workdir('run.virtio.')
        h.check_fresh_build()
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz', [h.PCINET_KO],
                                   env, storage=True)
        self.topo = h.Topology(wd, env['VMLINUZ'], initrd, TOPOLOGY)
        self.progress('== virtio: booting the board (one fabric, pcinet-peer '
                      '--blk as the other side)')
        self.topo.boot()
        a = self.a = self.topo.a
        self.peer = BlkPeer(self.topo, MIB)
        vio = self.peer.img
        with open(vio, 'wb') as f:	# the same bytes in both images
            for _ in range(MIB):
                f.write(os.urandom(1 << 20))
        nbd_img = wd / 'nbd.raw'
        shutil.copyfile(vio, nbd_img)
        self.peer.start()
        ns = self.peer.ns
        tap = self.tap()
        sh(['ip', '-n', ns, 'addr', 'add', f'{HOST_IP}/24', 'dev', tap])
        sh(['ip', '-n', ns, 'link', 'set', tap, 'mtu', str(MTU), 'up'])
        h.load(a)
        a.wait_until('[ -b /dev/vda ]', 60, what='/dev/vda')
        run(a, f'ip addr add {BOARD_IP}/24 dev pcinet0 && '
            f'ip link set pcinet0 mtu {MTU} up')
        h.wait_carrier(a, 1, 15)
        log = open(wd / 'qsd-nbd.log', 'wb')
        self.nbd = subprocess.Popen(
            ['ip', 'netns', 'exec', ns, 'qemu-storage-daemon', '--blockdev',
             f'driver=file,node-name=f0,filename={nbd_img}', '--nbd-server',
             f'addr.type=inet,addr.host={HOST_IP},addr.port={NBD_PORT}',
             '--export', 'type=nbd,id=e0,node-name=f0,name=disk,writable=on'],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while f':{NBD_PORT} ' not in sh(['ip', 'netns', 'exec', ns, 'ss',
                                         '-Hltn'], check=False):
            if self.nbd.poll() is not None or time.monotonic() > deadline:
                raise BenchError('the NBD daemon is not listening:\n'
                                 + (wd / 'qsd-nbd.log').read_text()[-800:])
            time.sleep(0.1)
        run(a, f'nbd-client -b 4096 -N disk {HOST_IP} {NBD_PORT} /dev/nbd0',
            timeout=60)
        sizes = run(a, 'blockdev --getsize64 /dev/vda; '
                    'blockdev --getsize64 /dev/nbd0').split()
        if sizes != [str(MIB << 20)] * 2:
            raise BenchError(f'device sizes {sizes}, the images {MIB << 20}')
        qsd = children(self.peer.proc.pid)
        self.pids = {'vblk_peer': [self.peer.proc.pid] + qsd,
                     'nbd_peer': [self.peer.proc.pid, self.nbd.pid]}
        g = self.info
        g['guest'] = {'kernel': run(a, 'uname -r').strip(),
                      'vcpus': int(run(a, 'nproc').strip()),
                      'mem_kib': int(run(a, "awk '/MemTotal/ {print $2}' "
                                         '/proc/meminfo').strip())}
        g['fio'] = run(a, 'fio --version').strip()
        g['qsd'] = sh(['qemu-storage-daemon', '--version']).splitlines()[0]
        g['nbd_client'] = run(a, 'nbd-client -V 2>&1 | head -1').strip()
        g['vda_queue'] = ' '.join(run(
            a, 'cat /sys/block/vda/mq/0/nr_tags /sys/block/vda/queue/'
            'max_sectors_kb /sys/block/vda/queue/max_segments').split())
        out = run(a, 'read t0 _ </proc/uptime; fio --version >/dev/null; '
                  'read t1 _ </proc/uptime; echo "$t0 $t1"').split()
        self.fio_start = float(out[1]) - float(out[0])
        g['fio_start_s'] = round(self.fio_start, 2)
        self.progress(f"  /dev/vda and /dev/nbd0 {MIB} MiB each; back end "
                      f"pids {self.pids}; vda nr_tags, max_sectors_kb, "
                      f"max_segments: {g['vda_queue']}")

    def tap(self):
        out = sh(['ip', '-n', self.peer.ns, '-o', 'link', 'show'])
        for line in out.splitlines():
            name = line.split(':')[1].strip().split('@')[0]
            if name != 'lo':
                return name
        raise BenchError('pcinet-peer made no TAP')

    def add(self, target, name, value):
        self.raw.setdefault((target, name), []).append(value)

    def fio(self, target, job, rep):
        a = self.a
        fn = {'vblk_peer': '/dev/vda', 'nbd_peer': '/dev/nbd0'}[target]
        _, fargs = F.FIO_JOBS[job]
        secs = self.args.storage_secs
        w0 = math.ceil(self.fio_start + FIO_RAMP + 0.3)
        win = (w0, max(1, int(self.fio_start + FIO_RAMP + secs - 0.3 - w0)))
        sampler = (f'rm -f /tmp/s0 /tmp/s1; (sleep {win[0]}; {SNAP} >/tmp/s0; '
                   f'sleep {win[1]}; {SNAP} >/tmp/s1.t; mv /tmp/s1.t /tmp/s1) '
                   '>/dev/null 2>&1 &')
        cmd = (f'{sampler} fio --name={job} --filename={fn} --size={MIB}M '
               f'--direct=1 --ioengine=io_uring {fargs} --time_based '
               f'--runtime={secs} --ramp_time={FIO_RAMP} --norandommap '
               '--randrepeat=0 --output-format=json --output=/tmp/fio.json '
               '>/tmp/fio.err 2>&1; rc=$?; cat /tmp/fio.json; '
               '[ $rc = 0 ] || cat /tmp/fio.err; exit $rc')
        c0 = proc_cpu_s(self.pids[target])
        out = run(a, cmd, timeout=secs + FIO_RAMP + 120)
        host_s = proc_cpu_s(self.pids[target]) - c0
        a.wait_until('[ -s /tmp/s1 ]', win[0] + win[1] + 10,
                     what='the counter sampler')
        s0 = parse_snap(run(a, 'cat /tmp/s0'))
        s1 = parse_snap(run(a, 'cat /tmp/s1'))
        try:
            d = json.loads(out[out.index('{'):])['jobs'][0]
        except (ValueError, KeyError, IndexError):
            raise BenchError(f'fio output not understood:\n{out[-800:]}') from None
        d = d['write'] if 'write' in job else d['read']
        if d.get('io_bytes', 0) <= 0:
            raise BenchError(f'fio {job} on {target} moved no bytes')
        window = s1['up'] - s0['up']		# the sampler's sleeps and more
        ios = d['iops'] * window		# fio's mean rate over the window
        r = {'rep': rep, 'target': target, 'job': job, 'iops': d['iops'],
             'bw_bytes': d['bw_bytes'], 'host_cpu_s': host_s,
             'board_busy_s': busy_s(s0['cpu'], s1['cpu']), 'window_s': window,
             'irqs': s1['irq'] - s0['irq'], 'doorbells': s1['db'] - s0['db']}
        self.runs.append(r)
        self.add(target, f'{job}_irqs_per_io', r['irqs'] / ios)
        if target == 'nbd_peer':
            self.add(target, f'{job}_doorbells_per_io', r['doorbells'] / ios)
        tl = TARGETS[target]
        if job.startswith('seq_'):
            mbs = d['bw_bytes'] / 1e6
            board = r['board_busy_s'] / (d['bw_bytes'] * window / 1e9)
            host = host_s / (d['bw_bytes'] * (secs + FIO_RAMP) / 1e9)
            self.add(target, f'{job}_mbs', mbs)
            self.add(target, f'{job}_board_s_per_gb', board)
            self.add(target, f'{job}_host_s_per_gb', host)
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: {mbs:7.1f} MB/s; '
                          f'CPU s/GB board {board:5.1f}, host {host:5.1f}; '
                          f"irqs/I/O {r['irqs'] / ios:.2f}")
        elif job == 'lat_read':
            p = d['clat_ns']['percentile']
            p50, p99 = p['50.000000'] / 1000, p['99.000000'] / 1000
            self.add(target, 'lat_read_p50_us', p50)
            self.add(target, 'lat_read_p99_us', p99)
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: p50 {p50:6.0f} us, '
                          f"p99 {p99:6.0f} us; irqs/I/O {r['irqs'] / ios:.2f}")
        else:
            self.add(target, f'{job}_iops', d['iops'])
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: {d["iops"]:7.0f} '
                          f"IOPS; irqs/I/O {r['irqs'] / ios:.2f}")

    def down(self):
        if self.topo is not None and self.a.alive():
            self.a.sh('nbd-client -d /dev/nbd0', timeout=30)
        if self.nbd is not None and self.nbd.poll() is None:
            self.nbd.terminate()
            try:
                self.nbd.wait(10)
            except subprocess.TimeoutExpired:
                self.nbd.kill()
                self.nbd.wait(10)
        if self.peer is not None:
            self.peer.close()
        if self.topo is not None:
            self.topo.teardown()


def virtio_bench(args, progress, fig):
    """The section: its document ('figures': 'target.name' -> fig(),
    'ratios', 'runs', 'errors', 'splats', 'guest')."""
    reps, secs = args.reps, args.storage_secs
    sec = {'secs': secs, 'reps': reps, 'mib': MIB, 'mtu': MTU,
           'targets': TARGETS,
           'labels': {n: f'{lab}, {u}' for n, lab, u in FIGURES},
           'figures': {}, 'ratios': {}, 'runs': [],
           'errors': [], 'splats': [], 'guest': {}}
    sec['plan'] = (f'fio {secs} s per run after a {FIO_RAMP} s ramp (io_uring, '
                   f'O_DIRECT, the {MIB} MiB device), {reps} repetitions, the two '
                   'routes interleaved within each job')
    progress('plan: ' + sec['plan'])
    R = Route(args, progress)
    try:
        R.up()
        for rep in range(1, reps + 1):
            for job in F.FIO_JOBS:
                for target in TARGETS:
                    try:
                        R.fio(target, job, rep)
                    except (BenchError, h.CaseFailure) as e:
                        msg = f'{target} fio {job} rep {rep}: {e}'
                        sec['errors'].append(msg)
                        progress('ERROR ' + msg.splitlines()[0][:200])
    except (h.HarnessError, h.CaseFailure, BenchError) as e:
        msg = f'{type(e).__name__}: {e}'
        sec['errors'].append(msg)
        progress('ERROR ' + msg.splitlines()[0][:200])
    finally:
        if R.topo is not None:
            for vm in R.topo.vms:
                sec['splats'] += [f'{vm.name}: {s}' for s in
                                  h.dmesg_check(vm.console_log())]
        R.down()
        if R.wd is not None:
            h.release_workdir(R.wd, args.keep or bool(sec['errors']))
    sec.update(R.info)
    sec['runs'] = R.runs
    for (target, name), vals in R.raw.items():
        unit = next(u for n, _, u in FIGURES if n == name)
        f = fig(vals, unit)
        if f is not None:
            sec['figures'][f'{target}.{name}'] = f
    for name, (goal, how) in GOALS.items():
        v, n = (sec['figures'].get(f'{t}.{name}') for t in TARGETS)
        if v and n and n['median']:
            ratio = v['median'] / n['median']
            sec['ratios'][name] = {
                'ratio': ratio, 'goal': goal, 'how': how,
                'met': ratio >= goal if how == 'min' else ratio <= goal}
    return sec
