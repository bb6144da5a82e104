# SPDX-License-Identifier: GPL-2.0-only
"""bench.py --only vhost: the route users deploy (issue 10, stage 3).  The
board's virtio disk served by pcinet-vhost on the host machine, against an
NBD disk over pcinet0 served by the same qemu-storage-daemon on the same
host: both machines QEMU guests on one fabric, tests/qemu/test_vhost.py's
topology and start (started(), vhost_start(), vhost_cleanup()).

    +---- a (QEMU): the host -----------+             +---- b: the board ---+
    | pcinet-vhost --link pcinet0       |             | pcinet.ko transport |
    |   --blk /tmp/vhost.raw            |<== fabric ==>| virtio_blk /dev/vda |
    |   qemu-storage-daemon (vhost-user |  -m 64M     |                     |
    |   blk export, its child)          |  -V 8M -n 4 |                     |
    | /dev/pcinet-vhost0                |             |                     |
    | qemu-storage-daemon NBD export    |             | nbd-client          |
    |   (/tmp/nbd.raw) on 10.77.0.2     |             |   /dev/nbd0         |
    | pcinet0 10.77.0.2                 |             | pcinet0 10.77.0.1   |
    +-----------------------------------+             +---------------------+

Both images MIB MiB of the same random bytes on a's tmpfs, both served by
qemu-storage-daemon's file driver with cache.direct=off (pcinet-vhost's
command line for its back end, repeated for the NBD export): the route is
the only difference.  fio runs on the board exactly as in bench.py --only
virtio (virtio_route.Route.fio: figures.FIO_JOBS, O_DIRECT, io_uring, time
based, the median of args.reps repetitions, the routes interleaved job by
job), with the board's CPU and interrupts per I/O over a window inside each
run.  Besides, per run:
  - guest a's CPU busy seconds (its /proc/stat, over the board's window
    by a sampler of its own) per GB for the sequential jobs, and both
    guests' busy share of the window: qemu-storage-daemon either way (for
    virtio it serves the window's pools itself through the memory file:
    no data path in a's kernel or in pcinet-vhost), TCP/IP and the net
    channel in a's kernel for NBD;
  - this machine's CPU seconds per GB: both QEMU processes' utime+stime
    over the run: under TCG on a shared machine, the host guest's vCPU is
    part of what each route costs.
"""

import os

import pcinet_harness as h
import figures as F
import virtio_route as VR
import test_vhost as TV

TARGETS = {'vblk_vhost': 'virtio-blk over pcinet (pcinet-vhost on a)',
           'nbd_vhost': 'NBD over pcinet0 (qemu-storage-daemon on a)'}
BOARD_IP, HOST_IP = '10.77.0.1', '10.77.0.2'
MTU = 65535			# pcinet's largest (ETH_MAX_MTU)
NBD_PORT = 10809
MIB = VR.MIB			# as the virtio section's images
VIMG, NIMG = '/tmp/vhost.raw', '/tmp/nbd.raw'
QSD_LOG, QSD_PID = '/tmp/qsd-nbd.log', '/tmp/qsd-nbd.pid'
HSNAP = ('/tmp/h0', '/tmp/h1')	# a's counters at the window's ends
TOPOLOGY = dict(machines=('a', 'b'), links=[('a', 'b')], fabric_size='64M',
                fabric_vio='8M', vectors=4)
PER_IO = (('irqs', 'board interrupts (pcinet vectors)'),
          ('db_out', 'board→host doorbells (the route\'s channel: virtio, '
           'or net for NBD)'),
          ('db_in', 'host→board doorbells the board received (likewise)'))
FIGURES = VR.FIGURES[:8] + (
    ('seq_read_board_busy_pct', 'sequential read: board busy, % of its '
     'window', '%'),
    ('seq_write_board_busy_pct', 'sequential write: board busy, % of its '
     'window', '%'),
    ('seq_read_hostvm_busy_pct', 'sequential read: host guest a busy, % of '
     'its window', '%'),
    ('seq_write_hostvm_busy_pct', 'sequential write: host guest a busy, % of '
     'its window', '%'),
    ('seq_read_hostvm_s_per_gb', 'sequential read: host guest a\'s CPU s per '
     'GB (its /proc/stat)', 's/GB'),
    ('seq_write_hostvm_s_per_gb', 'sequential write: host guest a\'s CPU s '
     'per GB (its /proc/stat)', 's/GB'),
    ('seq_read_host_s_per_gb', 'sequential read: this machine\'s CPU s per GB '
     '(both guests\' QEMU processes)', 's/GB'),
    ('seq_write_host_s_per_gb', 'sequential write: this machine\'s CPU s per '
     'GB (both guests\' QEMU processes)', 's/GB'),
) + tuple(
    (f'{job}_{what}_per_io', f'{F.FIO_JOBS[job][0]}: {lab} per I/O', '/I/O')
    for what, lab in PER_IO for job in F.FIO_JOBS)
GOALS = VR.GOALS


def host_snap(text):
    """a's uptime and /proc/stat cpu line from its sampler's file."""
    s = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == 'up':
            s['up'] = float(f[1])
        elif f and f[0] == 'cpu':
            s['cpu'] = [int(x) for x in f[1:]]
    if len(s) != 2:
        raise VR.BenchError(f'a\'s counters not understood:\n{text[-300:]}')
    return s


class VhostRoute(VR.Route):
    """Guests a (the host) and b (the board), pcinet-vhost and the NBD
    export on a; virtio_route's fio runs on b (self.a is the board there:
    the VM fio runs on), with a's CPU around each."""

    TARGETS = TARGETS
    DB_CHAN = {'vblk_vhost': 'dbv', 'nbd_vhost': 'dbn'}

    def __init__(self, args, progress):
        super().__init__(args, progress)
        self.host = self.a = None

    def host_counts(self, target):
        """No pcinet-peer here: a's side of the doorbells is its kernel's
        (not sampled); the board's counters are in the per-I/O rows."""
        return None

    def up(self):
        if not os.access(TV.VHOST, os.X_OK):
            raise VR.BenchError('pcinet-vhost not built (make -C '
                                'tools/pcinet-vhost pcinet-vhost)')
        env = h.load_env()
        wd = self.wd = h.make_workdir('run.vhost.')
        h.check_fresh_build()
        # one initramfs for both: --storage has fio, nbd-client and nbd;
        # pcinet-vhost and qemu-storage-daemon go in since it is built
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz', [h.PCINET_KO],
                                   env, storage=True)
        self.topo = h.Topology(wd, env['VMLINUZ'], initrd, TOPOLOGY)
        self.progress('== vhost: booting a (the host: pcinet-vhost, '
                      'qemu-storage-daemon) and b (the board) on one fabric')
        self.topo.boot()
        t, a, b = self.topo, self.topo.a, self.topo.b
        self.host, self.a = a, b
        self.pids = {tg: [a.proc.pid, b.proc.pid] for tg in TARGETS}
        for vm, tools in ((a, 'qemu-storage-daemon pcinet-vhost'),
                          (b, 'fio nbd-client')):
            VR.run(vm, f'for c in {tools}; do command -v $c >/dev/null || '
                   '{ echo "$c: not in the initramfs"; exit 1; }; done')
        # test_vhost's start: pcinet on both, /dev/pcinet-vhost0, the
        # images on a's tmpfs (prep), pcinet-vhost --blk offered
        TV.started(t, args=f'--blk {VIMG}', prep=(
            f'rm -f {VIMG} {NIMG}; dd if=/dev/urandom of={VIMG} bs=1M '
            f'count={MIB} 2>/dev/null && cp {VIMG} {NIMG} && sync'))
        b.wait_until('[ -b /dev/vda ]', 60, what='/dev/vda on b',
                     show='ls /sys/block; dmesg | grep -iE "pcinet|virtio" '
                     '| tail -n 15')
        self.dev = {'vblk_vhost': '/dev/vda', 'nbd_vhost': '/dev/nbd0'}
        h.net_up(a, HOST_IP, mtu=MTU)
        h.net_up(b, BOARD_IP, mtu=MTU)
        h.wait_carrier(b, 1, 15)
        VR.run(a, f'qemu-storage-daemon --blockdev driver=file,node-name=f0,'
               f'filename={NIMG},cache.direct=off --nbd-server addr.type=inet,'
               f'addr.host={HOST_IP},addr.port={NBD_PORT} --export type=nbd,'
               'id=e0,node-name=f0,name=disk,writable=on '
               f'</dev/null >{QSD_LOG} 2>&1 & echo $! >{QSD_PID}')
        a.wait_until(f'grep -qi ":{NBD_PORT:04X} 00000000:0000 0A" '
                     '/proc/net/tcp', 20, what='the NBD export listening',
                     show=f'cat {QSD_LOG}')
        VR.run(b, f'nbd-client -b 4096 -N disk {HOST_IP} {NBD_PORT} '
               '/dev/nbd0', timeout=60)
        sizes = VR.run(b, ' '.join(f'blockdev --getsize64 {self.dev[tg]};'
                                   for tg in TARGETS)).split()
        if sizes != [str(MIB << 20)] * len(TARGETS):
            raise VR.BenchError(f'device sizes {sizes}, the images '
                                f'{MIB << 20}')
        g = self.info
        g['guest'] = {'kernel': VR.run(b, 'uname -r').strip(),
                      'vcpus': int(VR.run(b, 'nproc').strip()),
                      'mem_kib': int(VR.run(b, "awk '/MemTotal/ {print $2}' "
                                            '/proc/meminfo').strip())}
        g['fio'] = VR.run(b, 'fio --version').strip()
        g['qsd'] = VR.run(a, 'qemu-storage-daemon --version | head -1').strip()
        g['nbd_client'] = VR.run(b, 'nbd-client -V 2>&1 | head -1').strip()
        g['qsd_cmdlines'] = [ln.strip() for ln in VR.run(
            a, 'for p in $(pidof qemu-storage-daemon); do '
            'tr "\\0" " " </proc/$p/cmdline; echo; done').splitlines()
            if ln.strip()]
        g['vda_queue'] = ' '.join(VR.run(
            b, 'cat /sys/block/vda/mq/0/nr_tags /sys/block/vda/queue/'
            'max_sectors_kb /sys/block/vda/queue/max_segments').split())
        out = VR.run(b, 'read t0 _ </proc/uptime; fio --version >/dev/null; '
                     'read t1 _ </proc/uptime; echo "$t0 $t1"').split()
        self.fio_start = float(out[1]) - float(out[0])
        g['fio_start_s'] = round(self.fio_start, 2)
        self.progress(f"  board's disks {self.dev}, {MIB} MiB each; /dev/vda's "
                      f"nr_tags, max_sectors_kb, max_segments: "
                      f"{g['vda_queue']}; back ends: {g['qsd_cmdlines']}")

    def fio(self, target, job, rep):
        """virtio_route's run on the board; a's busy seconds over the
        same window (a sampler of its own, started just before the
        board's)."""
        h0, h1 = HSNAP
        w0, w1 = self.window()
        VR.run(self.host, f'rm -f {h0} {h1}; (sleep {w0}; read u _ '
               f'</proc/uptime; read c </proc/stat; echo "up $u" >{h0}; '
               f'echo "$c" >>{h0}; sleep {w1}; read u _ </proc/uptime; '
               f'read c </proc/stat; {{ echo "up $u"; echo "$c"; }} '
               f'>{h1}.t; mv {h1}.t {h1}) >/dev/null 2>&1 &')
        n = len(self.runs)
        super().fio(target, job, rep)
        if len(self.runs) == n:
            return
        self.host.wait_until(f'[ -s {h1} ]', w0 + w1 + 10,
                             what='a\'s counter sampler')
        s0, s1 = (host_snap(VR.run(self.host, f'cat {f}')) for f in HSNAP)
        busy, window = VR.busy_s(s0['cpu'], s1['cpu']), s1['up'] - s0['up']
        r = self.runs[-1]
        r['hostvm_busy_s'], r['hostvm_window_s'] = busy, window
        if job.startswith('seq_'):
            gb = r['bw_bytes'] * window / 1e9
            self.add(target, f'{job}_hostvm_s_per_gb', busy / gb)
            self.add(target, f'{job}_hostvm_busy_pct', 100 * busy / window)
            self.add(target, f'{job}_board_busy_pct',
                     100 * r['board_busy_s'] / r['window_s'])
            self.progress(f'  {"":40s} {job:10s} rep {rep}: busy: host guest '
                          f"a {busy:.1f} s of {window:.1f} s "
                          f'({busy / gb:5.2f} s/GB), board '
                          f"{r['board_busy_s']:.1f} s of {r['window_s']:.1f} s")

    def down(self):
        t = self.topo
        if t is None:
            return
        if self.a is not None and self.a.alive():
            self.a.sh('nbd-client -d /dev/nbd0', timeout=30)
        if self.host is not None and self.host.alive():
            self.host.sh(f'kill $(cat {QSD_PID}) 2>/dev/null; '
                         f'cat {QSD_LOG}', timeout=30)
            TV.vhost_cleanup(t)
        t.teardown()


def vhost_bench(args, progress, fig):
    """The section: its document ('figures': 'target.name' -> fig(),
    'ratios', 'runs', 'errors', 'splats', 'guest')."""
    reps, secs = args.reps, args.storage_secs
    sec = {'secs': secs, 'reps': reps, 'mib': MIB, 'mtu': MTU,
           'targets': TARGETS,
           'labels': {n: f'{lab}, {u}' for n, lab, u in FIGURES},
           'figures': {}, 'ratios': {}, 'runs': [],
           'errors': [], 'splats': [], 'guest': {}}
    sec['plan'] = (f'fio {secs} s per run after a {VR.FIO_RAMP} s ramp '
                   f'(io_uring, O_DIRECT, the {MIB} MiB device), {reps} '
                   'repetitions, the routes interleaved within each job')
    progress('plan: ' + sec['plan'])
    R = VhostRoute(args, progress)
    try:
        R.up()
        for rep in range(1, reps + 1):
            for job in F.FIO_JOBS:
                for target in TARGETS:
                    try:
                        R.fio(target, job, rep)
                    except (VR.BenchError, h.CaseFailure) as e:
                        msg = f'{target} fio {job} rep {rep}: {e}'
                        sec['errors'].append(msg)
                        progress('ERROR ' + msg.splitlines()[0][:200])
    except (h.HarnessError, h.CaseFailure, h.CaseSkip, VR.BenchError) as e:
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
    sec['devices'] = R.dev
    sec['runs'] = R.runs
    sec['figures'], sec['ratios'] = VR.figures_of(R.raw, FIGURES, TARGETS,
                                                  GOALS, fig)
    return sec
