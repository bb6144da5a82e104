# SPDX-License-Identifier: GPL-2.0-only
"""bench.py --only virtio: the virtio channel's disk and folder over pcinet
against NBD and 9P over TCP on the same link, all served from this
machine (issue 10, stage 2), with QEMU's own virtio-blk disk of the board
as the "what a VM gets" reference.

    +------- board (QEMU) -------+  pcinet-fabric  +---- host, netns pnv-<pid> -----+
    | /dev/vdX  virtio_blk       |<===============>| pcinet-peer --blk vio.raw       |
    | /mnt/vfs  virtiofs         |  -m 64M -V 8M   |   --fs /tmp/pcinet-fsbench.*/vfs|
    |   (pcinet's transport)     |  -n 4           |   qemu-storage-daemon (vhost-   |
    | /dev/nbd0 nbd-client       |                 |   user-blk), virtiofsd          |
    | /mnt/9p   9p, trans=tcp    |                 | TAP pnv0 10.77.0.2: qemu-       |
    |   pcinet0 10.77.0.1        |                 |   storage-daemon NBD (nbd.raw), |
    | /dev/vdY  virtio-blk-pci   |                 |   diod (/tmp/pcinet-fsbench.*/  |
    |   (QEMU's own, qemu.raw)   |                 |   9p)                           |
    +----------------------------+                 +---------------------------------+

One board, one pcinet-peer.  The disk: virtio_blk on pcinet's transport
(-> window -> qemu-storage-daemon's vhost-user-blk export), an NBD device
over TCP on pcinet0 (-> pcinet-peer's TAP -> a second qemu-storage-daemon's
NBD export), and QEMU's virtio-blk-pci disk of the board (cache=writeback,
aio=threads, as bench.py's storage section), on images of the same size
and bytes in the same directory.  The folder: virtiofs on pcinet's
transport (-> virtiofsd, pcinet-peer's defaults) against the kernel's 9p
client over TCP on pcinet0 (-> diod on the TAP's address), on two
directories under /tmp with the same files.

Each fio figure is the median of args.reps repetitions, the routes
interleaved job by job.  The disk: bench.py's fio jobs (figures.FIO_JOBS),
O_DIRECT, time based.  The folder: buffered I/O (virtiofsd offers no
O_DIRECT by default), one pass over a FS_MIB file at most (--size, with
--runtime as a cap, the random jobs with fio's random map), the board's
page cache dropped before each run and fio's --invalidate=1: no byte is
read twice, so no read is served by the board's cache; writes go through
at once on both (virtiofs without the writeback cache, 9p cache=none).
Then a tar extraction of a source tree (the repository's tools/ and
drivers/, TREE_COPIES times) from the board's tmpfs into the mount, and a
metadata loop (dash/busybox builtins: create, stat, one rm of META_FILES
empty files, the caches dropped between the phases).

Besides fio's own figures, per run:
  - the board's CPU busy seconds per GB (sequential jobs), /proc/stat;
    the disk: over a window inside the run (fio's start and ramp left
    out), the folder: from fio's exec_prerun to its exec_postrun;
  - the host's CPU seconds per GB (sequential jobs) of the processes that
    serve the route (pcinet-peer and its back end for virtio; pcinet-peer,
    which moves the TAP's frames, and the NBD daemon or diod for TCP),
    from /proc/<pid>/stat over the whole fio run; none for QEMU's disk
    (QEMU's process is the board's vCPU too);
  - the board's interrupts per I/O over the same window as its CPU:
    every pcinet vector of /proc/interrupts (the doorbells the host
    rang), or for QEMU's disk its virtio-pci vectors;
  - doorbells per I/O over the same window, from the link's counters on
    the board (/sys/class/net/pcinet0/device/doorbells/): those the board
    rang toward the host (board->host: virtio_rung for the virtio routes,
    its kicks; net_rung for NBD and 9P, which is ethtool -S pcinet0's
    tx_doorbells + rx_space_doorbells, also kept in the runs) and those
    it received (host->board: virtio_received, the back end's calls and
    pcinet-peer's own status doorbells; net_received); none for QEMU's
    disk, whose notifies no guest counter sees;
  - for the virtio routes, the kicks pcinet-peer forwarded to the back
    end per I/O, from its status file before and after the whole fio run
    (like the host CPU), with the doorbells it received on the virtio
    vector (the board's virtio_rung seen from the other end) in the runs.
    The back end's calls ring the board without pcinet-peer: the board's
    count is the only one.
"""

import json
import math
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import pcinet_harness as h
import figures as F
from peer_lib import BlkPeer, sh

TARGETS = {'vblk_peer': 'virtio-blk over pcinet (pcinet-peer)',
           'nbd_peer': 'NBD over pcinet0 (pcinet-peer\'s TAP)',
           'vblk_qemu': 'reference: QEMU\'s virtio-blk-pci disk of the board'}
FS_TARGETS = {'vfs_peer': 'virtio-fs over pcinet (pcinet-peer, virtiofsd)',
              'ninep_peer': '9P over pcinet0 (diod on pcinet-peer\'s TAP)'}
MNT = {'vfs_peer': '/mnt/vfs', 'ninep_peer': '/mnt/9p'}
BOARD_IP, HOST_IP = '10.77.0.1', '10.77.0.2'
MTU = 65521			# a TAP's largest (test_peer.py, peer-mtu)
NBD_PORT = 10809
NINEP_PORT = 564
MIB = 128			# the three disk images, as the storage section's
FS_MIB = 256			# the folder's fio file: more than one run reads
FS_TAG = 'bench'
FS_JOBS = ('seq_read', 'seq_write', 'rand_read', 'rand_write')
META_FILES = 10000		# the metadata loop (issue 10)
TREE_COPIES = 20		# tools/ and drivers/ (git ls-files) this often:
			# 1,380 files (9P takes ~40 ms a file)
QEMU_SERIAL = 'pcinet-qemu-ref'	# tells the board's two virtio disks apart
FIO_RAMP = 1
CLK_TCK = os.sysconf('SC_CLK_TCK')
TOPOLOGY = dict(machines=('a',), links=[('a',)], fabric_size='64M',
                fabric_vio='8M', vectors=4)
PER_IO = (('irqs', 'board interrupts (pcinet vectors; QEMU\'s disk: its '
           'virtio-pci vectors)'),
          ('db_out', 'board→host doorbells (the route\'s channel: virtio, '
           'or net for NBD/9P)'),
          ('db_in', 'host→board doorbells the board received (likewise)'),
          ('host_kicks', 'host: kicks pcinet-peer forwarded to the back end'))
# the route's channel in the board's doorbells/ (none: QEMU's disk)
DB_CHAN = {'vblk_peer': 'dbv', 'vfs_peer': 'dbv', 'nbd_peer': 'dbn',
           'ninep_peer': 'dbn'}
DOORBELLS = '/sys/class/net/pcinet0/device/doorbells'
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
    for what, lab in PER_IO for job in F.FIO_JOBS)
FS_FIGURES = FIGURES[:4] + (
    ('tar_s', 'tar extraction of the tree into the mount, sync', 's'),
    ('meta_create_s', f'metadata: create {META_FILES:,} empty files, sync', 's'),
    ('meta_stat_s', f'metadata: stat the {META_FILES:,} files', 's'),
    ('meta_unlink_s', f'metadata: unlink the {META_FILES:,} files (rm), sync',
     's'),
) + FIGURES[6:10] + tuple(
    (f'{job}_{what}_per_io', f'{F.FIO_JOBS[job][0]}: {lab} per I/O', '/I/O')
    for what, lab in PER_IO for job in FS_JOBS)
# figure -> (wanted virtio/TCP ratio, 'min' or 'max'): the targets
GOALS = {'seq_read_mbs': (1.5, 'min'), 'seq_write_mbs': (1.5, 'min'),
         'rand_read_iops': (1.5, 'min'), 'rand_write_iops': (1.5, 'min'),
         'lat_read_p50_us': (0.7, 'max'), 'lat_read_p99_us': (0.7, 'max')}
FS_GOALS = {**{k: v for k, v in GOALS.items() if not k.startswith('lat_')},
            'tar_s': (1.0, 'max'), 'meta_create_s': (1.0, 'max'),
            'meta_stat_s': (1.0, 'max'), 'meta_unlink_s': (1.0, 'max')}

# the board's counters: the uptime, /proc/stat's cpu line and the link's
# doorbells of the virtio and the net channel, rung and received, first,
# read by dash builtins (no fork between them: the window is the uptimes'
# difference), then every pcinet vector, the virtio-pci request vectors
# (QEMU's disk: pcinet's virtio devices have no vector of their own) and
# the net front-end's doorbells (ethtool)
IRQ_SUM = ('awk \'{for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i} '
           'END {print n + 0}\'')
SNAP = ('{ read u _ </proc/uptime; read c </proc/stat; '
        f'read vr <{DOORBELLS}/virtio_rung; read vi <{DOORBELLS}/virtio_received; '
        f'read nr <{DOORBELLS}/net_rung; read ni <{DOORBELLS}/net_received; '
        'echo "up $u"; echo "$c"; echo "dbv $vr $vi"; echo "dbn $nr $ni"; '
        f'echo "irq $(grep pcinet /proc/interrupts | {IRQ_SUM})"; '
        f'echo "virq $(grep -E \'virtio[0-9]+-req\' /proc/interrupts | {IRQ_SUM})"; '
        'ethtool -S pcinet0 2>/dev/null | '
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
        elif len(f) == 2 and f[0] in ('irq', 'virq', 'db'):
            s[f[0]] = int(f[1])
        elif len(f) == 2 and f[0] == 'up':
            s['up'] = float(f[1])
        elif len(f) == 3 and f[0] in ('dbv', 'dbn'):
            s[f[0]] = (int(f[1]), int(f[2]))
    if len(s) != 7:
        raise BenchError(f'board counters not understood:\n{text[-300:]}')
    return s


def db_note(db, ios):
    """The progress line's doorbells per I/O, if the route has them."""
    if not db:
        return ''
    return (f", doorbells/I/O out {db['db_out'] / ios:.2f} "
            f"in {db['db_in'] / ios:.2f}")


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


def family(pid):
    """pid and its descendants (virtiofsd forks into its pid namespace)."""
    out = [pid]
    for c in children(pid):
        out += family(c)
    return out


def comm(pid):
    try:
        with open(f'/proc/{pid}/comm') as f:
            return f.read().strip()
    except OSError:
        return ''


def make_tree_tar(out):
    """out: a tar of the repository's tools/ and drivers/ (the files git
    knows), TREE_COPIES times under src/cNN/; (files, bytes)."""
    files = sh(['git', '-C', str(h.ROOT), 'ls-files', 'tools', 'drivers'])
    files = [f for f in files.split() if (h.ROOT / f).is_file()]
    size = sum((h.ROOT / f).stat().st_size for f in files)
    with tarfile.open(out, 'w', format=tarfile.USTAR_FORMAT) as tar:
        for c in range(TREE_COPIES):
            for f in files:
                tar.add(h.ROOT / f, arcname=f'src/c{c:02d}/{f}', recursive=False)
    return len(files) * TREE_COPIES, size * TREE_COPIES


class Route:
    """The board, pcinet-peer --blk --fs, the NBD daemon and diod; the
    fio runs and the folder tests.  A subclass with its own up() and
    down() reuses fio() (bench/vhost_route.py): TARGETS names its disks,
    DB_CHAN the channel whose doorbells (the board's device/doorbells/)
    each one's I/O rings."""

    TARGETS = TARGETS
    DB_CHAN = DB_CHAN

    def __init__(self, args, progress):
        self.args = args
        self.progress = progress
        self.topo = self.peer = self.nbd = self.diod = self.fsroot = None
        self.etc = None
        self.wd = None
        self.raw = {}
        self.fs_raw = {}
        self.runs = []
        self.info = {}
        self.pids = {}
        self.dev = {}
        self.fs_up = []

    def up(self):
        env = h.load_env()
        wd = self.wd = h.make_workdir('run.virtio.')
        h.check_fresh_build()
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz', [h.PCINET_KO],
                                   env, storage=True)
        qimg = wd / 'qemu.raw'
        with open(qimg, 'wb') as f:	# the same bytes in the three images
            for _ in range(MIB):
                f.write(os.urandom(1 << 20))
        qdisk = ['-drive', f'file={qimg},format=raw,if=none,id=vd0,'
                 'cache=writeback,aio=threads', '-device',
                 f'virtio-blk-pci,drive=vd0,serial={QEMU_SERIAL}']
        self.fs_dirs()
        self.topo = h.Topology(wd, env['VMLINUZ'], initrd,
                               dict(TOPOLOGY, vm_args={'a': qdisk}))
        self.progress('== virtio: booting the board (one fabric, pcinet-peer '
                      '--blk --fs as the other side, QEMU\'s virtio-blk disk)')
        self.topo.boot()
        a = self.a = self.topo.a
        self.peer = BlkPeer(self.topo, MIB,
                            fs=f"{self.fsroot / 'vfs'}:{FS_TAG}")
        shutil.copyfile(qimg, self.peer.img)
        nbd_img = wd / 'nbd.raw'
        shutil.copyfile(qimg, nbd_img)
        self.peer.start()
        ns = self.peer.ns
        tap = self.tap()
        sh(['ip', '-n', ns, 'addr', 'add', f'{HOST_IP}/24', 'dev', tap])
        sh(['ip', '-n', ns, 'link', 'set', tap, 'mtu', str(MTU), 'up'])
        h.load(a)
        a.wait_until('[ "$(ls -d /sys/block/vd* | wc -l)" = 2 ]', 60,
                     what='the two virtio disks')
        for line in run(a, 'for d in /sys/block/vd*; do echo "${d##*/} '
                        '$(cat $d/serial 2>/dev/null)"; done').splitlines():
            f = line.split()
            if f and f[0].startswith('vd'):
                t = 'vblk_qemu' if f[1:] == [QEMU_SERIAL] else 'vblk_peer'
                self.dev[t] = f'/dev/{f[0]}'
        if len(self.dev) != 2:
            raise BenchError(f'the board\'s virtio disks not told apart: {self.dev}')
        self.dev['nbd_peer'] = '/dev/nbd0'
        run(a, f'ip addr add {BOARD_IP}/24 dev pcinet0 && '
            f'ip link set pcinet0 mtu {MTU} up')
        h.wait_carrier(a, 1, 15)
        self.nbd = self.daemon(
            ['qemu-storage-daemon', '--blockdev',
             f'driver=file,node-name=f0,filename={nbd_img}', '--nbd-server',
             f'addr.type=inet,addr.host={HOST_IP},addr.port={NBD_PORT}',
             '--export', 'type=nbd,id=e0,node-name=f0,name=disk,writable=on'],
            NBD_PORT, 'qsd-nbd.log')
        run(a, f'nbd-client -b 4096 -N disk {HOST_IP} {NBD_PORT} /dev/nbd0',
            timeout=60)
        sizes = run(a, ' '.join(f'blockdev --getsize64 {self.dev[t]};'
                                for t in TARGETS)).split()
        if sizes != [str(MIB << 20)] * len(TARGETS):
            raise BenchError(f'device sizes {sizes}, the images {MIB << 20}')
        back = {}
        for c in children(self.peer.proc.pid):
            back[comm(c)[:9]] = family(c)
        self.pids = {'vblk_peer': [self.peer.proc.pid]
                     + back.get('qemu-stor', []),
                     'nbd_peer': [self.peer.proc.pid, self.nbd.pid],
                     'vfs_peer': [self.peer.proc.pid]
                     + back.get('virtiofsd', [])}
        g = self.info
        g['guest'] = {'kernel': run(a, 'uname -r').strip(),
                      'vcpus': int(run(a, 'nproc').strip()),
                      'mem_kib': int(run(a, "awk '/MemTotal/ {print $2}' "
                                         '/proc/meminfo').strip())}
        g['fio'] = run(a, 'fio --version').strip()
        g['qsd'] = sh(['qemu-storage-daemon', '--version']).splitlines()[0]
        g['nbd_client'] = run(a, 'nbd-client -V 2>&1 | head -1').strip()
        dev = self.dev['vblk_peer'][5:]
        g['vda_queue'] = ' '.join(run(
            a, f'cat /sys/block/{dev}/mq/0/nr_tags /sys/block/{dev}/queue/'
            f'max_sectors_kb /sys/block/{dev}/queue/max_segments').split())
        out = run(a, 'read t0 _ </proc/uptime; fio --version >/dev/null; '
                  'read t1 _ </proc/uptime; echo "$t0 $t1"').split()
        self.fio_start = float(out[1]) - float(out[0])
        g['fio_start_s'] = round(self.fio_start, 2)
        self.progress(f"  disks {self.dev}, {MIB} MiB each; back end pids "
                      f"{self.pids}; pcinet disk's nr_tags, max_sectors_kb, "
                      f"max_segments: {g['vda_queue']}")
        try:
            self.fs_up_board()
        except (BenchError, h.CaseFailure, h.HarnessError) as e:
            raise BenchError(f'folder setup: {e}') from None

    def fs_dirs(self):
        """The two exported directories, the same files in each: fio's
        file (FS_MIB MiB, random bytes), the tree's tar, the board's
        counter script."""
        self.fsroot = root = Path(tempfile.mkdtemp(prefix='pcinet-fsbench.',
                                                   dir='/tmp'))
        vfs, ninep = root / 'vfs', root / '9p'
        vfs.mkdir()
        with open(vfs / 'fio.dat', 'wb') as f:
            for _ in range(FS_MIB):
                f.write(os.urandom(1 << 20))
        self.tree_files, self.tree_bytes = make_tree_tar(vfs / 'src.tar')
        (vfs / 'snap.sh').write_text(SNAP + ' >"$1"\n')
        shutil.copytree(vfs, ninep)
        os.chmod(root, 0o755)

    def fs_up_board(self):
        """diod on the TAP's address; the board mounts both, takes the tar
        and the counter script into its tmpfs."""
        a = self.a
        ninep = self.fsroot / '9p'
        # diod drops a connection whose address it cannot name: the
        # namespace has no DNS; ip netns exec binds /etc/netns/NS/hosts
        # over /etc/hosts (removed in down())
        self.etc = Path('/etc/netns') / self.peer.ns
        self.etc.mkdir(parents=True, exist_ok=True)
        (self.etc / 'hosts').write_text(f'127.0.0.1 localhost\n'
                                        f'{BOARD_IP} board\n'
                                        f'{HOST_IP} host\n')
        self.diod = self.daemon(['diod', '-f', '-n', '-l',
                                 f'{HOST_IP}:{NINEP_PORT}', '-e', str(ninep),
                                 '-L', str(self.wd / 'diod.log')],
                                NINEP_PORT, 'diod.out')
        self.pids['ninep_peer'] = [self.peer.proc.pid, self.diod.pid]
        a.wait_until(f'grep -qx {FS_TAG} /sys/fs/virtiofs/*/tag', 30,
                     what='the virtio-fs device')
        run(a, f'mkdir -p {MNT["vfs_peer"]} {MNT["ninep_peer"]} && '
            f'mount -t virtiofs {FS_TAG} {MNT["vfs_peer"]} && '
            f'mount -t 9p -o trans=tcp,port={NINEP_PORT},aname={ninep},'
            f'version=9p2000.L {HOST_IP} {MNT["ninep_peer"]}', timeout=60)
        g = self.info
        g['fs_mounts'] = [run(a, f'grep " {MNT[t]} " /proc/mounts').strip()
                          for t in FS_TARGETS]
        sizes = run(a, ' '.join(f'stat -c %s {MNT[t]}/fio.dat;'
                                for t in FS_TARGETS)).split()
        if sizes != [str(FS_MIB << 20)] * len(FS_TARGETS):
            raise BenchError(f'fio.dat sizes {sizes} on the mounts')
        run(a, f'cp {MNT["ninep_peer"]}/src.tar {MNT["ninep_peer"]}/snap.sh '
            '/tmp/ && [ "$(tar -tf /tmp/src.tar | grep -vc /$)" = '
            f'{self.tree_files} ]', timeout=120)
        g['fs_versions'] = sh(['dpkg-query', '-W', '-f',
                               '${Package} ${Version}, ', 'qemu-system-common',
                               'diod'], check=False).strip(' ,')
        g['tree'] = (f'{self.tree_files} files ({TREE_COPIES} copies of the '
                     f'repository\'s tools/ and drivers/), '
                     f'{self.tree_bytes / 1e6:.1f} MB')
        self.fs_up = list(FS_TARGETS)
        self.progress(f"  folders: {g['fs_mounts']}; tree {g['tree']}")

    def daemon(self, cmd, port, logname):
        """cmd in pcinet-peer's namespace, listening on port within 20 s."""
        ns = self.peer.ns
        log = open(self.wd / logname, 'wb')
        p = subprocess.Popen(['ip', 'netns', 'exec', ns] + cmd, stdout=log,
                             stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while f':{port} ' not in sh(['ip', 'netns', 'exec', ns, 'ss', '-Hltn'],
                                    check=False):
            if p.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f'{cmd[0]} is not listening:\n'
                                 + (self.wd / logname).read_text()[-800:])
            time.sleep(0.1)
        return p

    def tap(self):
        out = sh(['ip', '-n', self.peer.ns, '-o', 'link', 'show'])
        for line in out.splitlines():
            name = line.split(':')[1].strip().split('@')[0]
            if name != 'lo':
                return name
        raise BenchError('pcinet-peer made no TAP')

    def add(self, target, name, value):
        self.raw.setdefault((target, name), []).append(value)

    def per_io(self, raw, target, job, s0, s1, ios):
        """The interrupts and the route's doorbells (rung, received) per
        I/O into raw; the doorbells too into the run's record."""
        irq = 'virq' if target == 'vblk_qemu' else 'irq'
        irqs = (s1[irq] - s0[irq]) / ios
        raw.setdefault((target, f'{job}_irqs_per_io'), []).append(irqs)
        db = {}
        if target in self.DB_CHAN:
            c = self.DB_CHAN[target]
            db = {'db_out': s1[c][0] - s0[c][0], 'db_in': s1[c][1] - s0[c][1]}
            for what, n in db.items():
                raw.setdefault((target, f'{job}_{what}_per_io'), []).append(
                    n / ios)
        return irqs, db

    def host_counts(self, target):
        """pcinet-peer's virtio counters now (a status file written after
        this call), for the virtio routes; None for the others."""
        if self.DB_CHAN.get(target) != 'dbv':
            return None
        c = self.peer.fresh_counters()
        return {k: int(c[k]) for k in ('vio_doorbells_in', 'vio_kicks')}

    def host_per_io(self, raw, target, job, r, h0, ios):
        """pcinet-peer's kicks forwarded per I/O (ios: the whole run's)
        into raw, its counts into the run's record r."""
        if h0 is None:
            return
        h1 = self.host_counts(target)
        r['host_doorbells_in'] = h1['vio_doorbells_in'] - h0['vio_doorbells_in']
        r['host_kicks'] = h1['vio_kicks'] - h0['vio_kicks']
        raw.setdefault((target, f'{job}_host_kicks_per_io'), []).append(
            r['host_kicks'] / ios)

    def window(self):
        """The counters' window inside a fio run from its start: (seconds
        to the first sample, seconds to the second), fio's start and ramp
        left out."""
        secs = self.args.storage_secs
        w0 = math.ceil(self.fio_start + FIO_RAMP + 0.3)
        return (w0, max(1, int(self.fio_start + FIO_RAMP + secs - 0.3 - w0)))

    def fio(self, target, job, rep):
        a = self.a
        fn = self.dev[target]
        _, fargs = F.FIO_JOBS[job]
        secs = self.args.storage_secs
        win = self.window()
        sampler = (f'rm -f /tmp/s0 /tmp/s1; (sleep {win[0]}; {SNAP} >/tmp/s0; '
                   f'sleep {win[1]}; {SNAP} >/tmp/s1.t; mv /tmp/s1.t /tmp/s1) '
                   '>/dev/null 2>&1 &')
        cmd = (f'{sampler} fio --name={job} --filename={fn} --size={MIB}M '
               f'--direct=1 --ioengine=io_uring {fargs} --time_based '
               f'--runtime={secs} --ramp_time={FIO_RAMP} --norandommap '
               '--randrepeat=0 --output-format=json --output=/tmp/fio.json '
               '>/tmp/fio.err 2>&1; rc=$?; cat /tmp/fio.json; '
               '[ $rc = 0 ] || cat /tmp/fio.err; exit $rc')
        pids = self.pids.get(target)
        h0 = self.host_counts(target)
        c0 = proc_cpu_s(pids) if pids else 0
        out = run(a, cmd, timeout=secs + FIO_RAMP + 120)
        host_s = proc_cpu_s(pids) - c0 if pids else None
        a.wait_until('[ -s /tmp/s1 ]', win[0] + win[1] + 10,
                     what='the counter sampler')
        s0 = parse_snap(run(a, 'cat /tmp/s0'))
        s1 = parse_snap(run(a, 'cat /tmp/s1'))
        d = fio_result(out, job, target)
        window = s1['up'] - s0['up']		# the sampler's sleeps and more
        ios = d['iops'] * window		# fio's mean rate over the window
        r = {'rep': rep, 'target': target, 'job': job, 'iops': d['iops'],
             'bw_bytes': d['bw_bytes'], 'host_cpu_s': host_s,
             'board_busy_s': busy_s(s0['cpu'], s1['cpu']), 'window_s': window,
             'irqs': s1['irq'] - s0['irq'], 'virqs': s1['virq'] - s0['virq'],
             'doorbells': s1['db'] - s0['db']}
        self.runs.append(r)
        irqs, db = self.per_io(self.raw, target, job, s0, s1, ios)
        r.update(db)
        dbs = db_note(db, ios)
        # the host's counts: the whole run, at fio's mean rate (as its CPU)
        self.host_per_io(self.raw, target, job, r, h0,
                         d['iops'] * (secs + FIO_RAMP))
        tl = self.TARGETS[target][:40]
        if job.startswith('seq_'):
            mbs = d['bw_bytes'] / 1e6
            board = r['board_busy_s'] / (d['bw_bytes'] * window / 1e9)
            self.add(target, f'{job}_mbs', mbs)
            self.add(target, f'{job}_board_s_per_gb', board)
            hs = ''
            if host_s is not None:
                host = host_s / (d['bw_bytes'] * (secs + FIO_RAMP) / 1e9)
                self.add(target, f'{job}_host_s_per_gb', host)
                hs = f', host {host:5.2f}'
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: {mbs:7.1f} MB/s; '
                          f'CPU s/GB board {board:5.2f}{hs}; '
                          f'irqs/I/O {irqs:.2f}{dbs}')
        elif job == 'lat_read':
            p = d['clat_ns']['percentile']
            p50, p99 = p['50.000000'] / 1000, p['99.000000'] / 1000
            self.add(target, 'lat_read_p50_us', p50)
            self.add(target, 'lat_read_p99_us', p99)
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: p50 {p50:6.0f} us, '
                          f'p99 {p99:6.0f} us; irqs/I/O {irqs:.2f}{dbs}')
        else:
            self.add(target, f'{job}_iops', d['iops'])
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: {d["iops"]:7.0f} '
                          f'IOPS; irqs/I/O {irqs:.2f}{dbs}')

    def fs_add(self, target, name, value):
        self.fs_raw.setdefault((target, name), []).append(value)

    def fs_fio(self, target, job, rep):
        """One buffered fio run on the folder's file: one pass at most
        (--size, --runtime a cap), the board's cache dropped first; the
        board's counters from fio's exec_prerun to its exec_postrun."""
        a = self.a
        fn = f'{MNT[target]}/fio.dat'
        _, fargs = F.FIO_JOBS[job]
        secs = self.args.storage_secs
        cmd = ('cd /tmp && rm -f /tmp/s0 /tmp/s1 && sync && '
               'echo 3 >/proc/sys/vm/drop_caches && '
               f'fio --name={job} --filename={fn} --size={FS_MIB}M --direct=0 '
               f'--invalidate=1 --ioengine=io_uring {fargs} --runtime={secs} '
               '--randrepeat=0 "--exec_prerun=sh /tmp/snap.sh /tmp/s0" '
               '"--exec_postrun=sh /tmp/snap.sh /tmp/s1" '
               '--output-format=json --output=/tmp/fio.json '
               '>/tmp/fio.err 2>&1; rc=$?; cat /tmp/fio.json; '
               '[ $rc = 0 ] || cat /tmp/fio.err; exit $rc')
        pids = self.pids[target]
        h0 = self.host_counts(target)
        c0 = proc_cpu_s(pids)
        out = run(a, cmd, timeout=secs + 120)
        host_s = proc_cpu_s(pids) - c0
        s0 = parse_snap(run(a, 'cat /tmp/s0'))
        s1 = parse_snap(run(a, 'cat /tmp/s1'))
        d = fio_result(out, job, target)
        gb = d['io_bytes'] / 1e9
        r = {'rep': rep, 'target': target, 'job': job, 'iops': d['iops'],
             'bw_bytes': d['bw_bytes'], 'io_bytes': d['io_bytes'],
             'runtime_ms': d.get('runtime'), 'host_cpu_s': host_s,
             'board_busy_s': busy_s(s0['cpu'], s1['cpu']),
             'window_s': s1['up'] - s0['up'],
             'irqs': s1['irq'] - s0['irq'], 'doorbells': s1['db'] - s0['db']}
        self.runs.append(r)
        irqs, db = self.per_io(self.fs_raw, target, job, s0, s1,
                               max(1, d['total_ios']))
        r.update(db)
        dbs = db_note(db, max(1, d['total_ios']))
        self.host_per_io(self.fs_raw, target, job, r, h0,
                         max(1, d['total_ios']))
        tl = FS_TARGETS[target][:40]
        if job.startswith('seq_'):
            mbs = d['bw_bytes'] / 1e6
            board, host = r['board_busy_s'] / gb, host_s / gb
            self.fs_add(target, f'{job}_mbs', mbs)
            self.fs_add(target, f'{job}_board_s_per_gb', board)
            self.fs_add(target, f'{job}_host_s_per_gb', host)
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: {mbs:7.1f} MB/s; '
                          f'CPU s/GB board {board:5.2f}, host {host:5.2f}; '
                          f'irqs/I/O {irqs:.2f}{dbs}')
        else:
            self.fs_add(target, f'{job}_iops', d['iops'])
            self.progress(f'  {tl:40s} {job:10s} rep {rep}: {d["iops"]:7.0f} '
                          f'IOPS; irqs/I/O {irqs:.2f}{dbs}')

    def folder(self, target, rep):
        """The tree's tar extracted from the board's tmpfs into the mount
        (then sync); the metadata loop: create, stat, unlink META_FILES
        empty files (dash builtins for create and stat, one busybox rm for
        the unlinks), the board's caches dropped before each phase (not
        timed)."""
        a, n = self.a, META_FILES
        d = f'{MNT[target]}/work'
        tl = FS_TARGETS[target][:40]
        drop = 'sync; echo 3 >/proc/sys/vm/drop_caches'
        out = run(a, f'grep -q " {MNT[target]} " /proc/mounts && '
                  f'rm -rf {d} && mkdir -p {d} && {drop} && '
                  'read t0 _ </proc/uptime && '
                  f'tar -C {d} -xf /tmp/src.tar && sync && '
                  'read t1 _ </proc/uptime && echo "tar $t0 $t1"', timeout=600)
        m = re.search(r'tar ([0-9.]+) ([0-9.]+)', out)
        tar_s = float(m.group(2)) - float(m.group(1))
        got = run(a, f'find {d}/src -type f | wc -l', timeout=300).strip()
        if got != str(self.tree_files):
            raise BenchError(f'{tl}: {got} files extracted, the tar has '
                             f'{self.tree_files}')
        run(a, f'rm -rf {d}/src', timeout=600)
        self.fs_add(target, 'tar_s', tar_s)
        out = run(a, f'mkdir -p {d}/meta && cd {d}/meta && {drop}; '
                  'read t0 _ </proc/uptime; '
                  f'i=0; while [ $i -lt {n} ]; do : >f$i; i=$((i + 1)); done; '
                  f'sync; read t1 _ </proc/uptime; {drop}; '
                  'read t2 _ </proc/uptime; '
                  f'i=0; while [ $i -lt {n} ]; do [ -e f$i ] || '
                  'echo "missing f$i"; i=$((i + 1)); done; '
                  f'read t3 _ </proc/uptime; {drop}; read t4 _ </proc/uptime; '
                  'rm -f f*; sync; read t5 _ </proc/uptime; '
                  'echo "meta $t0 $t1 $t2 $t3 $t4 $t5"; left=$(ls | wc -l); '
                  f'echo "left $left"; cd / && rmdir {d}/meta', timeout=900)
        if 'missing' in out:
            raise BenchError(f'{tl}: created files missing:\n{out[-500:]}')
        t = [float(x) for x in re.search(r'meta' + r' (\S+)' * 6, out).groups()]
        phases = (t[1] - t[0], t[3] - t[2], t[5] - t[4])
        for what, s in zip(('create', 'stat', 'unlink'), phases):
            self.fs_add(target, f'meta_{what}_s', s)
        self.progress(f'  {tl:40s} folder     rep {rep}: tar {tar_s:5.2f} s '
                      f'({self.tree_files / tar_s:5.0f} files/s); {n} files: '
                      f'create {phases[0]:5.2f} s, stat {phases[1]:5.2f} s, '
                      f'unlink {phases[2]:5.2f} s')

    def down(self):
        if self.topo is not None and self.a.alive():
            self.a.sh(f'umount {MNT["vfs_peer"]}; umount {MNT["ninep_peer"]}; '
                      'nbd-client -d /dev/nbd0', timeout=30)
        for p in (self.nbd, self.diod):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
        if self.peer is not None:
            self.peer.close()
        if self.topo is not None:
            self.topo.teardown()
        if self.fsroot is not None:
            shutil.rmtree(self.fsroot, ignore_errors=True)
        if self.etc is not None:
            shutil.rmtree(self.etc, ignore_errors=True)
            try:
                self.etc.parent.rmdir()		# if we made it
            except OSError:
                pass


def fio_result(out, job, target):
    """The read or write part of fio's json, which must have moved bytes."""
    try:
        d = json.loads(out[out.index('{'):])['jobs'][0]
    except (ValueError, KeyError, IndexError):
        raise BenchError(f'fio output not understood:\n{out[-800:]}') from None
    d = d['write'] if 'write' in job else d['read']
    if d.get('io_bytes', 0) <= 0:
        raise BenchError(f'fio {job} on {target} moved no bytes')
    return d


def figures_of(raw, figures, targets, goals, fig):
    """'target.name' -> fig() of the repetitions; the ratios of the first
    target to the second against goals."""
    out, ratios = {}, {}
    for (target, name), vals in raw.items():
        unit = next(u for n, _, u in figures if n == name)
        f = fig(vals, unit)
        if f is not None:
            out[f'{target}.{name}'] = f
    first, second = list(targets)[:2]
    for name, (goal, how) in goals.items():
        v, n = out.get(f'{first}.{name}'), out.get(f'{second}.{name}')
        if v and n and n['median']:
            ratio = v['median'] / n['median']
            ratios[name] = {
                'ratio': ratio, 'goal': goal, 'how': how,
                'met': ratio >= goal if how == 'min' else ratio <= goal}
    return out, ratios


def virtio_bench(args, progress, fig):
    """The section: its document ('figures': 'target.name' -> fig(),
    'ratios', 'fs' (the same for the folder), 'runs', 'errors', 'splats',
    'guest')."""
    reps, secs = args.reps, args.storage_secs
    sec = {'secs': secs, 'reps': reps, 'mib': MIB, 'mtu': MTU,
           'targets': TARGETS,
           'labels': {n: f'{lab}, {u}' for n, lab, u in FIGURES},
           'figures': {}, 'ratios': {}, 'runs': [],
           'errors': [], 'splats': [], 'guest': {}}
    fs = sec['fs'] = {'targets': FS_TARGETS, 'mib': FS_MIB,
                      'meta_files': META_FILES,
                      'labels': {n: f'{lab}, {u}' for n, lab, u in FS_FIGURES},
                      'figures': {}, 'ratios': {}}
    sec['plan'] = (f'fio {secs} s per run after a {FIO_RAMP} s ramp (io_uring, '
                   f'O_DIRECT, the {MIB} MiB device), {reps} repetitions, the '
                   'routes interleaved within each job')
    fs['plan'] = (f'fio (io_uring, buffered, --invalidate=1 and the board\'s '
                  f'drop_caches before each run) over a {FS_MIB} MiB file, one '
                  f'pass at most, {secs} s at most; tar and the metadata loop '
                  f'({META_FILES:,} files); {reps} repetitions, the routes '
                  'interleaved within each job')
    progress('plan: ' + sec['plan'] + '; folder: ' + fs['plan'])
    R = Route(args, progress)

    def attempt(what, f, *a):
        try:
            f(*a)
        except (BenchError, h.CaseFailure) as e:
            msg = f'{what}: {e}'
            sec['errors'].append(msg)
            progress('ERROR ' + msg.splitlines()[0][:200])
    try:
        try:
            R.up()
        except BenchError as e:		# the folder's part: the disks run
            if not R.dev.get('nbd_peer') or 'folder setup' not in str(e):
                raise
            sec['errors'].append(str(e))
            progress('ERROR ' + str(e).splitlines()[0][:200])
        for rep in range(1, reps + 1):
            for job in F.FIO_JOBS:
                for target in TARGETS:
                    attempt(f'{target} fio {job} rep {rep}', R.fio, target,
                            job, rep)
        for rep in range(1, reps + 1):
            for job in FS_JOBS:
                for target in R.fs_up:
                    attempt(f'{target} fio {job} rep {rep}', R.fs_fio,
                            target, job, rep)
        for rep in range(1, reps + 1):
            for target in R.fs_up:
                attempt(f'{target} folder rep {rep}', R.folder, target, rep)
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
    sec['devices'] = R.dev
    sec['runs'] = R.runs
    sec['figures'], sec['ratios'] = figures_of(R.raw, FIGURES, TARGETS, GOALS,
                                               fig)
    fs['figures'], fs['ratios'] = figures_of(R.fs_raw, FS_FIGURES, FS_TARGETS,
                                             FS_GOALS, fig)
    return sec
