"""Reading a chunk's NanoAOD columns straight into device arrays, for GPU workers.

On a GPU worker, uproot inflates and interprets every basket on the host and the columns
are then copied to the device: that host work bounds ADL Q8 (reading its columns alone
took 0.51 s of a 0.65 s run on the H200; docs/executor.md#reading). Here the host only
cuts each basket's zlib streams out of the file (uproot gives the basket positions; a
local file is mapped, through uproot's MemmapSource) and inflates them (python-isal); the
bytes go to the device in one copy and the big-endian values become native ones there,
with no per-basket Python of uproot's interpretation. ``read_many`` reads several columns
as one batch (the executor's read-ahead gives it a task's columns). A batch of many
streams (``NVCOMP_MIN_STREAMS``) is inflated on the device instead, by NVIDIA's nvCOMP in
one call, where ``nvidia-nvcomp-cu13`` is installed and one of the device's
``NVCOMP_SLOTS`` is free (or frees within ``NVCOMP_WAIT``). These three are set on each
task from ``gpuexec.reading.nvcomp.*`` (docs/configuration.md). The same code runs with
numpy as the array module, which is how it is tested against uproot without a GPU.

What it reads: the three kinds of buffer NanoEvents asks for plain NanoAOD branches
(coffea's form keys ``B,!load``, ``B,!load,!content``, ``nB,!load,!counts2offsets``):
a flat numeric branch, the content of a jagged one without per-entry headers, and offsets
from a counts branch, in baskets stored as they are or compressed with any of ROOT's
zlib, LZMA (CMS NanoAOD's usual setting), LZ4 and ZSTD (the host decompresses those
three with uproot's own decompressors; only zlib goes to nvCOMP). Anything else (other
interpretations, embedded baskets, other transforms) raises ``Unsupported`` or is not
matched by ``column_for``, and the caller reads it as before.
"""

from __future__ import annotations

import bisect
import fcntl
import functools
import os
import struct
import tempfile
import threading
import time
from dataclasses import dataclass

import numpy as np

_KEY = struct.Struct(">ihiIhh")  # fNbytes, version, fObjlen, fDatime, fKeylen, fCycle
_BASKET = struct.Struct(">Hiiii")  # fVersion, fBufferSize, fNevBufSize, fNevBuf, fLast
_BLOCK = struct.Struct("<2sB3s3s")  # algorithm, method, compressed, inflated sizes
_LZ4_CHECKSUM = struct.Struct(">Q")  # xxhash64 of an LZ4 block, before its data
ZLIB, LZMA, LZ4, ZSTD = b"ZL", b"XZ", b"L4", b"ZS"  # ROOT's block algorithms
_ALIGN = 16  # nvCOMP wants every input stream 4-byte aligned (seen on the H200)
# Defaults of gpuexec.reading.nvcomp.*, which the executor sets on each task; the
# measurements behind them: docs/executor.md#nvcomp.
# A batch smaller than this many streams of its largest one's size: the host inflates it.
NVCOMP_MIN_STREAMS = 32
# nvCOMP calls from many processes on one GPU stop overlapping: at most this many batches
# per device at once, across the host's processes (``_DeviceSlots``); 0: no limit.
NVCOMP_SLOTS = 4
# Seconds a batch that finds every slot taken waits before the host inflates it.
NVCOMP_WAIT = 0.4


class Unsupported(Exception):
    """This branch or basket is not one this reader handles: read it the usual way."""


@dataclass(slots=True)
class Basket:
    entry_start: int
    entry_stop: int
    keylen: int
    border: int  # bytes of values; after them come the entry offsets (jagged branches)
    objlen: int  # inflated bytes (values + entry offsets)
    stored: bytes | None  # the payload of a basket stored uncompressed
    blocks: list  # (algorithm, compressed data, inflated size) of a compressed basket
    where: str  # "branch basket i in file", for messages

    @property
    def streams(self) -> list:
        """(zlib stream, inflated size) of every block, if all are zlib, else []."""
        if any(algo != ZLIB for algo, _d, _u in self.blocks):
            return []
        return [(data, size) for _a, data, size in self.blocks]

    def local(self, start: int, stop: int) -> tuple[int, int]:
        """The entries [start, stop) that fall in this basket, counted from its first."""
        return (max(start, self.entry_start) - self.entry_start,
                min(stop, self.entry_stop) - self.entry_start)


def _value_dtypes(branch, jagged: bool):
    """(big-endian dtype on file, native dtype) of ``branch``'s values."""
    import uproot

    interp = branch.interpretation
    if jagged:
        if not isinstance(interp, uproot.AsJagged) or interp.header_bytes != 0:
            raise Unsupported(f"{branch.name}: {interp!r} is not a plain jagged branch")
        interp = interp.content
    if type(interp) is not uproot.AsDtype or interp.from_dtype.shape != ():
        raise Unsupported(f"{branch.name}: {interp!r} is not a plain numeric branch")
    on_file, native = interp.from_dtype, interp.to_dtype
    if on_file.newbyteorder("=") != native or native.kind not in "biuf":
        raise Unsupported(f"{branch.name}: {on_file} read as {native}")
    return on_file, native


# uproot's memory-mapped source per local file, per process: a basket is then a view of
# the page cache, where the source uproot.open gives (fsspec's) serves each request
# through its event-loop thread: on this repository's 2-core VM, the 28 baskets of one
# 200k-event task of ADL Q8 came in 8.8 ms through it against 0.2 ms mapped
_MAPPED: dict = {}
_MAPPED_LOCK = threading.Lock()
MAPPED_FILES_KEPT = 16


def _source(file):
    """The source ``find_baskets`` reads ``file`` (an uproot ReadOnlyFile) through:
    uproot's ``MemmapSource`` of it where it is a local file, else its own source."""
    path = file.file_path
    try:
        stat = os.stat(path)
    except (OSError, TypeError, ValueError):  # a URL, or another kind of source
        return file.source
    key = (path, stat.st_ino, stat.st_size, stat.st_mtime_ns)  # a rewritten file: new map
    with _MAPPED_LOCK:
        source = _MAPPED.get(key)
        if source is None:
            from uproot.source.file import MemmapSource

            source = _MAPPED[key] = MemmapSource(path, num_fallback_workers=1)
            while len(_MAPPED) > MAPPED_FILES_KEPT:  # dropped, not closed: a read in
                _MAPPED.pop(next(iter(_MAPPED)))     # another thread may hold a view
    return source


def find_baskets(branch, start: int, stop: int) -> list[Basket]:
    """The baskets of ``branch`` holding entries [start, stop), their headers parsed and
    their compressed bytes read (one request for all, through ``_source``)."""
    if branch.embedded_baskets:
        raise Unsupported(f"{branch.name}: baskets embedded in the TTree")
    offsets = branch.entry_offsets
    first = bisect.bisect_right(offsets, start) - 1
    last = bisect.bisect_left(offsets, stop)
    seeks = branch.member("fBasketSeek")
    sizes = branch.member("fBasketBytes")
    ranges = [(int(seeks[i]), int(seeks[i]) + int(sizes[i])) for i in range(first, last)]
    source = _source(branch.file)
    out = []
    for i, chunk in zip(range(first, last), source.chunks(ranges, notifications=_Sink())):
        raw = memoryview(np.asarray(chunk.raw_data, dtype=np.uint8).reshape(-1))
        nbytes, _version, objlen, _datime, keylen, _cycle = _KEY.unpack_from(raw, 0)
        _v, _size, _nevsize, _nev, last_byte = _BASKET.unpack_from(
            raw, keylen - _BASKET.size - 1)
        where = f"{branch.name} basket {i} in {branch.file.file_path}"
        basket = Basket(offsets[i], offsets[i + 1], keylen, last_byte - keylen, objlen,
                        None, [], where)
        payload = raw[keylen:nbytes]
        if objlen == nbytes - keylen:
            basket.stored = bytes(payload)
        else:
            pos = 0
            while pos < len(payload):
                algo, _method, c3, u3 = _BLOCK.unpack_from(payload, pos)
                csize, usize = int.from_bytes(c3, "little"), int.from_bytes(u3, "little")
                data = payload[pos + _BLOCK.size:pos + _BLOCK.size + csize]
                if algo == LZ4:  # an xxhash64 of the block comes first, as uproot checks
                    import xxhash

                    (checksum,) = _LZ4_CHECKSUM.unpack_from(data, 0)
                    data = data[_LZ4_CHECKSUM.size:]
                    if xxhash.xxh64(data).intdigest() != checksum:
                        raise ValueError(f"{where}: an LZ4 block's checksum does not match")
                elif algo not in (ZLIB, LZMA, ZSTD):
                    raise Unsupported(f"{where}: {bytes(algo)!r} compression")
                basket.blocks.append((bytes(algo), data, usize))
                pos += _BLOCK.size + csize
            if sum(u for _a, _d, u in basket.blocks) != objlen:
                raise ValueError(f"{where}: its blocks inflate to other than its "
                                 f"{objlen} bytes")
        out.append(basket)
    return out


class _Sink:
    """The notification queue uproot's sources post finished chunks to (unused here)."""

    def put(self, _item):
        pass


# ----------------------------------------------------------------------------- inflate
_local = threading.local()


def _nvcomp_codec():
    """This thread's nvCOMP Deflate codec (a Codec serves one thread), or None where
    nvCOMP is not installed."""
    codec = getattr(_local, "codec", False)
    if codec is False:
        try:
            from nvidia import nvcomp
        except ImportError:
            codec = None
        else:
            codec = nvcomp.Codec(algorithm="Deflate", bitstream_kind=nvcomp.BitstreamKind.RAW)
        _local.codec = codec
    return codec


def nvcomp_version() -> str | None:
    """The version of nvCOMP's Python package where it is installed (GPU workers then
    inflate large batches with it), else None. Found, not imported: a process that only
    asks (a client) gets no CUDA context."""
    from importlib import metadata, util

    try:
        if util.find_spec("nvidia.nvcomp") is None:
            return None
    except ModuleNotFoundError:  # not even the "nvidia" namespace package
        return None
    try:
        return metadata.version("nvidia-nvcomp-cu13")
    except metadata.PackageNotFoundError:  # unpacked without its metadata
        return "installed"


class _DeviceSlots:
    """``n`` slots for nvCOMP calls on one device, shared by the processes of a host: a
    slot is an exclusive ``flock`` on a file named by the device's PCI bus id (released by
    the kernel should its process die) and a lock for the threads of this process."""

    def __init__(self, device: str, n: int):
        # per user, 0700: another user can neither hold these slots nor lose their limit
        folder = os.path.join(tempfile.gettempdir(), f"gpuexec-{os.getuid()}-nvcomp-slots")
        self.files = []
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            if os.stat(folder).st_uid != os.getuid():  # made by someone else: not ours
                raise PermissionError(f"{folder} belongs to another user")
            for k in range(n):  # read-only suffices for flock
                path = os.path.join(folder, f"{device.replace(':', '_')}-{k}.lock")
                self.files.append((os.open(path, os.O_RDONLY | os.O_CREAT, 0o600),
                                   threading.Lock()))
        except OSError:  # no shared folder: the calls go unlimited, as without slots
            for fd, _lock in self.files:
                os.close(fd)
            self.files = None

    def acquire(self, wait: float = 0.0):
        """A slot held (give it to ``release``), True where slots cannot be kept, or None
        when every slot is still taken after ``wait`` seconds (polled every millisecond)."""
        if self.files is None:
            return True
        slot = self._try()
        deadline = time.perf_counter() + wait
        while slot is None and time.perf_counter() < deadline:
            time.sleep(0.001)
            slot = self._try()
        return slot

    def _try(self):
        """A slot free now, held, or None (``acquire`` without a wait)."""
        for fd, lock in self.files:
            if lock.acquire(blocking=False):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd, lock
                except OSError:  # held by another process
                    lock.release()
        return None

    @staticmethod
    def release(slot) -> None:
        if slot is not True:
            fd, lock = slot
            fcntl.flock(fd, fcntl.LOCK_UN)
            lock.release()


_SLOTS: dict = {}
_SLOTS_LOCK = threading.Lock()


def _device_slots(cp) -> _DeviceSlots | None:
    """The current device's nvCOMP slots, or None when ``NVCOMP_SLOTS`` is 0 (no limit)."""
    if NVCOMP_SLOTS <= 0:
        return None
    bus = cp.cuda.Device().pci_bus_id
    with _SLOTS_LOCK:
        slots = _SLOTS.get((bus, NVCOMP_SLOTS))
        if slots is None:
            slots = _SLOTS[bus, NVCOMP_SLOTS] = _DeviceSlots(bus, NVCOMP_SLOTS)
    return slots


def stream_equivalents(sizes) -> float:
    """A batch of zlib streams of inflated ``sizes``, counted in streams of its largest
    one's size (nvCOMP's call lasts as long as its largest stream takes)."""
    largest = max(sizes, default=0)
    return sum(sizes) / largest if largest else 0.0


def inflater(xp, streams: float | None = None) -> str:
    """Which inflater ``read_*`` uses with array module ``xp`` for a batch of
    ``streams`` zlib streams (``stream_equivalents``; None: many): "nvcomp" (on the
    device) or "host" (uproot's zlib decompressor, then one copy)."""
    if xp is np or _nvcomp_codec() is None:
        return "host"
    return "host" if streams is not None and streams < NVCOMP_MIN_STREAMS else "nvcomp"


@functools.cache
def _host_decompressors() -> dict:
    """algorithm -> (data, inflated size) -> bytes: uproot's own decompressors; zlib's is
    the one uproot's reader uses (``gpuexec.io.inflate.decompressor``), with the library
    GPUExecutor's ``inflate`` setting chooses (python-isal by default)."""
    import uproot

    from gpuexec.io import inflate

    return {ZLIB: inflate.decompressor().decompress, LZMA: uproot.LZMA(1).decompress,
            LZ4: uproot.LZ4(1).decompress, ZSTD: uproot.ZSTD(1).decompress}


def _host_payload(basket: Basket, decompressors) -> np.ndarray:
    if basket.stored is not None:
        return np.frombuffer(basket.stored, dtype=np.uint8)
    parts = []
    for algo, data, size in basket.blocks:
        out = decompressors[algo](data, size)
        if len(out) != size:
            raise ValueError(f"{basket.where}: a block inflated to {len(out)} bytes, its "
                             f"header says {size}")
        parts.append(out)
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def _payloads(baskets: list[Basket], xp, copy):
    """Every basket's inflated payload, in order, in one uint8 array of ``xp``, and
    where each starts in it; ``copy`` moves a host array to ``xp``."""
    starts = np.zeros(len(baskets) + 1, dtype=np.int64)
    np.cumsum([b.objlen for b in baskets], out=starts[1:])
    all_zlib = all(b.stored is not None or b.streams for b in baskets)
    streams = stream_equivalents([u for b in baskets for _a, _d, u in b.blocks])
    slot = None
    if all_zlib and inflater(xp, streams) == "nvcomp":
        slots = _device_slots(xp)
        # None: nvCOMP stayed busy with other batches; the host (True: no limit)
        slot = True if slots is None else slots.acquire(NVCOMP_WAIT)
    if slot is None:
        decompressors = _host_decompressors()
        parts = [_host_payload(b, decompressors) for b in baskets]
        host = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
        return copy(host), starts
    try:
        return _nvcomp_payloads(baskets, xp, starts, copy), starts
    finally:
        _DeviceSlots.release(slot)


def _nvcomp_error(err: RuntimeError, nbytes: int) -> Exception:
    """nvCOMP's failure as the engine's device error, so that the executor knows it for a
    device fault (out of memory, or any other) and moves the chunk to the CPU pool."""
    from gpuexec.kernels.gpu.errors import DeviceOutOfMemory, GPUCallError

    if "out of memory" in str(err).lower():
        return DeviceOutOfMemory("the nvCOMP inflate", nbytes, str(err))
    return GPUCallError(f"the nvCOMP inflate of {nbytes:,} bytes failed: {err}")


def _nvcomp_payloads(baskets, cp, starts, copy):
    """``_payloads`` on the device: the raw deflate streams (and stored payloads) in one
    pinned buffer, one copy, one batched nvCOMP decode with the inflated sizes given."""
    from nvidia import nvcomp

    codec = _nvcomp_codec()
    pieces = []  # (bytes to copy, is a deflate stream, inflated size)
    for b in baskets:
        if b.stored is not None:
            pieces.append((b.stored, False, len(b.stored)))
        else:  # a zlib stream is a 2-byte header, the raw deflate stream, an Adler-32
            pieces.extend((s[2:-4], True, u) for s, u in b.streams)
    at = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([-(-len(p) // _ALIGN) * _ALIGN for p, _d, _u in pieces], out=at[1:])
    pinned = cp.cuda.alloc_pinned_memory(max(int(at[-1]), 1))
    host = np.frombuffer(pinned, dtype=np.uint8, count=int(at[-1]))
    for k, (p, _d, _u) in enumerate(pieces):
        host[at[k]:at[k] + len(p)] = np.frombuffer(p, dtype=np.uint8)
    device = copy(host)
    deflated = [k for k, (_p, d, _u) in enumerate(pieces) if d]
    outputs = {}
    if deflated:
        sizes = [pieces[k][2] for k in deflated]
        views = [device[at[k]:at[k] + len(pieces[k][0])] for k in deflated]
        try:
            config = codec.decompression_config(codec.compression_config(sizes))
            decoded = codec.decode(nvcomp.as_arrays(views), decompression_config=config)
        except RuntimeError as err:  # nvCOMP raises plain RuntimeErrors for device faults
            raise _nvcomp_error(err, sum(sizes)) from err
        for k, out in zip(deflated, decoded):
            outputs[k] = cp.asarray(out).view(cp.uint8)
        # the decode is done before the call's nvCOMP slot is given back (its stream is
        # the codec's own, named by the outputs' array interface)
        interface = getattr(decoded[0], "__cuda_array_interface__", {}) if decoded else {}
        stream = interface.get("stream")
        if stream is not None:
            cp.cuda.ExternalStream(stream).synchronize()
    parts = [outputs[k] if k in outputs else device[at[k]:at[k] + pieces[k][2]]
             for k in range(len(pieces))]
    if not parts:
        return cp.zeros(0, dtype=cp.uint8)
    out = cp.concatenate(parts)
    if out.size != int(starts[-1]):
        raise ValueError(f"nvCOMP inflated {out.size} bytes where the baskets hold "
                         f"{int(starts[-1])}")
    return out


# ------------------------------------------------------------------------------ values
def _native(raw, on_file, native, xp):
    """Big-endian bytes ``raw`` (uint8 of ``xp``) as values of dtype ``native``."""
    if xp is np:  # numpy swaps big-endian values itself, faster than a strided copy
        return raw.view(on_file).astype(native)
    size = on_file.itemsize
    if size > 1:  # CuPy has no big-endian dtypes: reverse each value's bytes, one gather
        raw = xp.ascontiguousarray(raw.reshape(-1, size)[:, ::-1]).reshape(-1)
    return raw.view(native)


def _gather(payload, pieces, xp):
    """The byte ranges ``pieces`` ((start, stop) into ``payload``) joined."""
    parts = [payload[a:b] for a, b in pieces if b > a]
    if not parts:
        return xp.zeros(0, dtype=np.uint8)
    return parts[0] if len(parts) == 1 else xp.concatenate(parts)


def _copier(xp, copy):
    return copy if copy is not None else (lambda a: a) if xp is np else xp.asarray


@dataclass(slots=True)
class _Plan:
    """One column of a batched read: checked against the headers, its baskets found."""

    kind: str  # "flat", "content" or "offsets" (a counts branch read as offsets)
    branch: object
    start: int
    stop: int
    on_file: np.dtype
    native: np.dtype
    baskets: list


def _plan(kind: str, branch, start: int, stop: int) -> _Plan:
    """Refuses (``Unsupported``) a column this module cannot read, from its interpretation
    and basket headers, before anything is decompressed."""
    on_file, native = _value_dtypes(branch, jagged=kind == "content")
    if kind == "offsets" and native.kind not in "iu":
        raise Unsupported(f"{branch.name}: counts of dtype {native}")
    baskets = find_baskets(branch, start, stop) if stop > start else []
    size = on_file.itemsize
    for b in baskets:
        if kind == "content" and b.border == b.objlen:
            raise Unsupported(f"{branch.name}: a basket without entry offsets")
        if kind != "content" and b.border != (b.entry_stop - b.entry_start) * size:
            raise Unsupported(f"{branch.name}: a basket of {b.border} bytes for "
                              f"{b.entry_stop - b.entry_start} entries")
    return _Plan(kind, branch, start, stop, on_file, native, baskets)


def _content_bounds(plans, first, payload, at, xp) -> dict:
    """(plan, basket, entry) -> where that entry's values start in its basket, for the
    entries where the content columns of ``plans`` begin and end inside a basket: a jagged
    basket's entry offsets follow its values (a count, then big-endian int32 offsets from
    the key's start; the last, unused, is the values' end). One read back to the host for
    all of them."""
    wanted = []  # (payload position of the offset, plan, basket, entry)
    for p, plan in enumerate(plans):
        if plan.kind != "content":
            continue
        for k, b in enumerate(plan.baskets):
            for j in b.local(plan.start, plan.stop):
                if 0 < j < b.entry_stop - b.entry_start:
                    wanted.append((at[first[p] + k] + b.border + 4 + 4 * j, p, k, j))
    if not wanted:
        return {}
    index = xp.asarray(np.array([w[0] for w in wanted], dtype=np.int64))
    words = payload[index[:, None] + xp.arange(4)].reshape(-1)
    values = _native(words, np.dtype(">i4"), np.dtype(np.int32), xp)
    host = values.get() if hasattr(values, "get") else values
    return {(p, k, j): v - plans[p].baskets[k].keylen
            for (_w, p, k, j), v in zip(wanted, host.tolist())}


def _finish(plan: _Plan, p: int, base: int, payload, at, bounds, xp):
    """Plan ``p``'s column cut out of the batch's payload (its baskets from ``base`` on)."""
    if plan.stop <= plan.start:
        values = xp.zeros(0, dtype=plan.native)
    else:
        size, pieces = plan.on_file.itemsize, []
        for k, b in enumerate(plan.baskets):
            lo, hi = b.local(plan.start, plan.stop)
            if plan.kind != "content":
                pieces.append((at[base + k] + lo * size, at[base + k] + hi * size))
                continue
            n = b.entry_stop - b.entry_start
            a = 0 if lo == 0 else (b.border if lo == n else bounds[p, k, lo])
            z = b.border if hi == n else (0 if hi == 0 else bounds[p, k, hi])
            if not 0 <= a <= z <= b.border or (z - a) % size:
                raise ValueError(f"{plan.branch.name} in {plan.branch.file.file_path}: "
                                 f"entry offsets {a}..{z} outside a basket's {b.border} "
                                 f"bytes of values")
            pieces.append((at[base + k] + a, at[base + k] + z))
        values = _native(_gather(payload, pieces, xp), plan.on_file, plan.native, xp)
    if plan.kind != "offsets":
        return values
    offsets = xp.zeros(values.shape[0] + 1, dtype=np.int64)
    xp.cumsum(values, out=offsets[1:])
    return offsets


def read_many(columns, xp, copy=None) -> list:
    """Several columns of one chunk in one batch: ``columns`` is a list of (kind, branch,
    start, stop) with kind "flat" (a flat numeric branch), "content" (the values of a
    jagged branch, flat) or "offsets" (int64 offsets, from 0, of the lists a counts
    branch gives the lengths of). Every basket of every column is inflated together (one
    copy to the device; one nvCOMP call where it inflates them), so a GPU worker pays the
    batch's costs once per task instead of once per column. Returns, per column, a native
    array of ``xp`` or the ``Unsupported`` that refused it (the others are read all the
    same); ``copy`` moves host bytes to ``xp`` (default ``xp.asarray``; the executor
    times it)."""
    plans, refused = [], {}
    for i, (kind, branch, start, stop) in enumerate(columns):
        try:
            plans.append((i, _plan(kind, branch, start, stop)))
        except Unsupported as err:
            refused[i] = err
    first, baskets = [], []
    for _i, plan in plans:
        first.append(len(baskets))
        baskets.extend(plan.baskets)
    out: list = [refused.get(i) for i in range(len(columns))]
    if not plans:
        return out
    payload, at = _payloads(baskets, xp, _copier(xp, copy))
    bounds = _content_bounds([plan for _i, plan in plans], first, payload, at, xp)
    for p, (i, plan) in enumerate(plans):
        out[i] = _finish(plan, p, first[p], payload, at, bounds, xp)
    return out


def _read_one(kind: str, branch, start: int, stop: int, xp, copy):
    (got,) = read_many([(kind, branch, start, stop)], xp, copy)
    if isinstance(got, Unsupported):
        raise got
    return got


def read_flat(branch, start: int, stop: int, xp, copy=None):
    """Entries [start, stop) of a flat numeric branch as a native array of ``xp``
    (``read_many`` of one column)."""
    return _read_one("flat", branch, start, stop, xp, copy)


def read_content(branch, start: int, stop: int, xp, copy=None):
    """The values of entries [start, stop) of a jagged branch (NanoAOD's ``Muon_pt``,
    counts in another branch), flat, as a native array of ``xp`` (``read_many`` of one
    column)."""
    return _read_one("content", branch, start, stop, xp, copy)


def read_offsets(branch, start: int, stop: int, xp, copy=None):
    """int64 offsets (from 0) of the lists whose lengths counts branch ``branch`` holds
    for entries [start, stop) (``read_many`` of one column)."""
    return _read_one("offsets", branch, start, stop, xp, copy)


# coffea NanoEvents' form keys for plain NanoAOD branches, and the kind of column each is
_PATTERNS = {
    ("!load",): "flat",
    ("!load", "!content"): "content",
    ("!load", "!counts2offsets", "!skip", "!offsets"): "offsets",
}


def column_for(nodes) -> tuple | None:
    """(branch name, kind for ``read_many``) for the nodes of a NanoEvents buffer key, or
    None when this module does not read that kind of buffer."""
    if len(nodes) < 2 or nodes[0].startswith("!"):
        return None
    kind = _PATTERNS.get(tuple(nodes[1:]))
    return None if kind is None else (nodes[0], kind)
