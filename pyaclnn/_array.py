"""Device arrays: shape, strides and dtype over a block of the backend's memory pool.

An array remembers the stream of the last call that used it. Reading it
(:meth:`DeviceArray.numpy`) waits for that stream; closing it gives its block
back to the pool on that stream, which reuses it in stream order (see
:mod:`pyaclnn._pool`). Uploads and fills are queued on a stream too.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from math import prod
from typing import TYPE_CHECKING, Any, Generic, cast, overload

import numpy as np
import numpy.typing as npt

from . import _captures, _context, _decl, _generic, _timeline, acl
from . import backends as _backends
from . import dtypes as _dtypes
from ._executors import Call
from ._pool import Block, MemoryPool
from ._stream import Stream, StreamState, current, require_stream_on
from .errors import describe

_H2D = _decl.constant("ACL_MEMCPY_HOST_TO_DEVICE")
_D2D = _decl.constant("ACL_MEMCPY_DEVICE_TO_DEVICE")
#: The alignment aclnn operators expect of a tensor's storage base, as aclrtMalloc gives it.
PTR_ALIGNMENT = 32
_D2H = _decl.constant("ACL_MEMCPY_DEVICE_TO_HOST")


_ORDER_LOCK = threading.Lock()  # the last write and the readers since of every array (see _readers)
_VIEWS_LOCK = threading.Lock()  # the counts of open views (reshape); closes may race in finalizers

# The scalar type of a DeviceArray, as NumPy's NDArray[np.float32] has one. Its default (Any) keeps
# an unparameterized ``DeviceArray`` an array of any dtype for type checkers, with no
# "missing type parameters" under --strict; typing.TypeVar takes a default only from Python 3.13,
# so the default is given where only type checkers look (they bundle typing_extensions' stubs).
if TYPE_CHECKING:
    from typing_extensions import TypeVar

    _S = TypeVar("_S", bound=np.generic, default=Any)
else:
    from typing import TypeVar

    _S = TypeVar("_S", bound=np.generic)
_T = TypeVar("_T", bound=np.generic)
#: A dtype that fixes the scalar type statically: ``np.float16`` or ``np.dtype(np.float16)``.
DTypeOf = type[_T] | np.dtype[_T]
#: The other names of a dtype ("float16", ``float``, ``pyaclnn.bfloat16``): arrays of any scalar
#: type to type checkers. Not NumPy's ``DTypeLike``, which takes ``np.float32`` too: a call given
#: ``np.float32`` where float16 is expected would then type-check through this form.
OtherDType = str | type[bool | int | float | complex]

# The keyword arguments of the constructors' overloads, each written once (PEP 692 ``**kwargs:
# Unpack[...]``): where an array is made (``_Placement``), and its layout (``_Layout``, ``_Foreign``).
if TYPE_CHECKING:
    from typing import TypedDict

    from typing_extensions import Unpack

    class _Placement(TypedDict, total=False):
        backend: str | None
        stream: Stream | None
        device: int | None

    class _Strided(TypedDict, total=False):
        strides: Sequence[int] | None
        offset: int

    class _Layout(_Placement, _Strided, total=False):
        storage_size: int | None

    class _Foreign(_Strided, total=False):
        owner: Any
        device: int | None
        backend: str | None


class DeviceArray(Generic[_S]):
    """An array in device memory: shape, strides (in bytes, as NumPy's) and offset (in elements)
    over a block of the pool.

    Indexing (ints, slices of positive step, ``...``, ``None``), :attr:`T`,
    :meth:`transpose`, :meth:`reshape` and iteration give views of the same block,
    as NumPy's basic indexing does.

    Create one with :func:`to_device`, :func:`empty` or :func:`zeros`; read it
    back with :meth:`numpy`, which waits for the work queued on it.
    ``DeviceArray[np.float32]`` names an array of float32 for type checkers (as
    NumPy's ``NDArray[np.float32]``; ``_S`` in the signatures below is that scalar
    type), and :meth:`numpy` gives that ``NDArray``; a plain ``DeviceArray`` is one
    of any dtype. ``DeviceArray[np.float32]`` also works at run time (in
    annotations, or called as the class). ``close()``
    (or garbage collection) gives the memory back to the backend's pool, where
    later work of the same stream reuses it at once and other streams once that
    stream is past it; :func:`pyaclnn.finalize` returns it to the device. A
    closed array raises ValueError when used. Not meant to be closed by one
    thread while another uses it.
    """

    # Slots make the per-call outputs cheaper to build; __dict__ keeps arrays open to user attributes.
    # _block: the memory; _CLOSED once closed (not None: `closed` then reads one attribute of it).
    # _last_descriptor: (format, block, handle) of the latest descriptor() call.
    # _stream: the Stream of the last call that wrote the array (None: no queued work can use it).
    # _written_at: the count of work queued on _stream once that write was queued (set after it
    #   was: the write is done once the stream's `done` reaches it), or None: not known, so every
    #   work queued there counts.
    # _readers: the Streams that read it since that write, other than _stream (a tuple), or None.
    #   Readers run together: a read waits for the last write only; a write waits for the last
    #   write and every read since, then becomes the last write. Lock discipline: both change
    #   under _ORDER_LOCK, only after the waits they record were queued; _readers is replaced,
    #   never changed in place, so a thread may read it without the lock; no stream's lock is
    #   taken under _ORDER_LOCK (the waits are queued outside it).
    # _base: for a view (reshape), the array it views, which owns the block and the streams of
    # last use for both; _views: open views of this array; _held: its block, kept for them after
    # its own close() (the last view's close gives it back).
    # _graphs: for an array (a base) that live graphs hold, {ReplayOrder of each graph: the count
    #   of its replays this array has taken in (_settle)}, else None: a replay writes the array
    #   without touching it, and the array takes the replay in at its next use (ReplayOrder).
    __slots__ = (
        "backend",
        "shape",
        "dtype",
        "_strides",
        "offset",
        "storage_size",
        "_pool",
        "_block",
        "_last_descriptor",
        "_stream",
        "_readers",
        "_written_at",
        "_base",
        "_views",
        "_held",
        "_graphs",
        "__weakref__",
        "__dict__",
    )
    backend: str
    shape: tuple[int, ...]
    dtype: np.dtype[_S]
    _strides: tuple[int, ...]  # in elements, as aclCreateTensor takes them (``strides`` gives bytes)
    offset: int
    storage_size: int
    _pool: MemoryPool
    _block: Block
    _last_descriptor: tuple[int, Block, Any] | None  # Any: the backend's aclTensor handle
    _stream: Stream | None
    _readers: tuple[Stream, ...] | None
    _written_at: int | None
    _base: DeviceArray[_S] | None
    _views: int
    _held: Block | None
    _graphs: dict[ReplayOrder, int] | None

    @overload
    def __init__(
        self: DeviceArray[_T], shape: Sequence[int], dtype: DTypeOf[_T], **layout: Unpack[_Layout]
    ) -> None: ...
    @overload
    def __init__(
        self: DeviceArray[Any], shape: Sequence[int], dtype: OtherDType, **layout: Unpack[_Layout]
    ) -> None: ...
    def __init__(
        self,
        shape: Sequence[int],
        dtype: Any,
        *,
        strides: Sequence[int] | None = None,
        offset: int = 0,
        storage_size: int | None = None,
        backend: str | None = None,
        stream: Stream | None = None,
        device: int | None = None,
    ) -> None:
        shape = _shape(shape)
        dtype = _dtypes.as_dtype(dtype)
        _dtypes.from_numpy(dtype)  # TypeError for dtypes ACL has no name for
        ctx = _context.context(backend)
        self._setup(
            ctx,
            shape,
            dtype,
            tuple(int(s) for s in strides) if strides is not None else _dtypes.contiguous_strides(shape),
            int(offset),
            prod(shape) if storage_size is None else int(storage_size),
            stream,
            _pool_of(ctx, stream, device)
            if stream is not None or not _captures.active
            else _capturing_pool(ctx, _pool_of(ctx, None, device)),
        )

    @overload
    @classmethod
    def from_ptr(
        cls, ptr: int, shape: Sequence[int], dtype: DTypeOf[_T], **layout: Unpack[_Foreign]
    ) -> DeviceArray[_T]: ...
    @overload
    @classmethod
    def from_ptr(
        cls, ptr: int, shape: Sequence[int], dtype: OtherDType, **layout: Unpack[_Foreign]
    ) -> DeviceArray[Any]: ...
    @classmethod
    def from_ptr(
        cls,
        ptr: int,
        shape: Sequence[int],
        dtype: Any,
        *,
        strides: Sequence[int] | None = None,
        offset: int = 0,
        owner: Any = None,
        device: int | None = None,
        backend: str | None = None,
    ) -> DeviceArray[Any]:
        """Wrap device memory pyaclnn does not own (torch_npu's ``data_ptr()``, pyACL's ``acl.rt.malloc``).

        The wrapper works wherever a DeviceArray does (inputs, ``out=``,
        ``numpy()``). ``close()`` drops it and never frees the memory; ``owner``
        is kept alive as long as the wrapper. Order the other library's work
        with pyaclnn's yourself (synchronize its stream, or run pyaclnn on it
        with :class:`ExternalStream`).

        Parameters
        ----------
        ptr : int
            Device address of the storage base (32-byte aligned, as aclrtMalloc gives).
        shape : sequence of int
        dtype : dtype
            Any dtype ACL names (float32, float16, bfloat16, int32, ...).
        strides, offset : sequence of int, int
            In elements, as ``aclCreateTensor`` takes them; None means contiguous.
        owner : object, optional
            Kept alive while the wrapper lives (the tensor the memory belongs to).
        device : int, optional
            The device of the memory (the thread's current one by default).
        backend : {"numpy", "npu"}, optional

        Raises
        ------
        TypeError
            If ``ptr`` is not an int, or for a dtype ACL has no name for.
        ValueError
            For a ``ptr`` that is not 32-byte aligned, negative sizes, strides or
            offset, a bad device, or (numpy backend) a range that is not inside one
            allocation of that device.
        """
        if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)):
            raise TypeError(f"ptr must be an int device address, got {type(ptr).__name__}")
        ptr = int(ptr)
        shape = _shape(shape)
        dtype = _dtypes.as_dtype(dtype)
        _dtypes.from_numpy(dtype)
        strides = _dtypes.contiguous_strides(shape) if strides is None else _shape(strides, "strides")
        if len(strides) != len(shape):
            raise ValueError(
                f"strides has {len(strides)} values for {len(shape)} dims of shape {list(shape)}"
            )
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"offset must be an int >= 0 (in elements), got {describe(offset)}")
        ctx = _context.context(backend)
        pool = _pool_of(ctx, None, device)
        size = prod(shape)
        storage = int(offset) + (1 + sum((d - 1) * s for d, s in zip(shape, strides)) if size else 0)
        nbytes = storage * dtype.itemsize
        if nbytes and not 0 < ptr < 1 << 64:
            raise ValueError(f"ptr {ptr:#x} is not a device address")
        if ptr % PTR_ALIGNMENT:
            raise ValueError(
                f"ptr {ptr:#x} is not {PTR_ALIGNMENT}-byte aligned: pass the storage base (as "
                "aclrtMalloc gives it) and the data's position in it as offset= (in elements)"
            )
        owning = _backends.get(ctx.name).device_memory(ptr, nbytes) if nbytes else pool.device
        if owning is not None and owning != pool.device:
            where = "is not inside one allocation of" if owning < 0 else f"lies on device {owning}, not"
            raise ValueError(
                f"ptr {ptr:#x} + {nbytes} bytes (shape {list(shape)}, strides {list(strides)}, "
                f"offset {offset}, "
                f"{dtype}) {where} device {pool.device} of backend {ctx.name!r}"
            )
        array = cls.__new__(cls)
        array.backend = ctx.name
        array.shape, array.dtype, array._strides, array.offset = shape, dtype, strides, int(offset)
        array.storage_size = storage
        array._pool = pool
        array._last_descriptor = None
        array._stream = array._readers = array._written_at = array._base = array._held = None
        array._graphs = None
        array._views = 0
        array._block = ForeignBlock(ptr, nbytes, owner) if nbytes else pool.empty_block
        return array

    @staticmethod  # (not a classmethod: no subclass makes outputs, and no bound method is made per call)
    def _contiguous(
        ctx: _context._Context, shape: tuple[int, ...], dtype: np.dtype[_T], stream: Stream
    ) -> DeviceArray[_T]:
        """A contiguous array of an already valid shape and dtype for work on ``stream``
        (the outputs of a call)."""
        array: DeviceArray[_T] = DeviceArray.__new__(DeviceArray)
        strides, size = _contiguous_layout(shape)
        array._setup(ctx, shape, dtype, strides, 0, size, stream, stream._state.pool)
        return array

    def _setup(
        self,
        ctx: _context._Context,
        shape: tuple[int, ...],
        dtype: np.dtype[_S],
        strides: tuple[int, ...],
        offset: int,
        storage_size: int,
        stream: Stream | None,
        pool: MemoryPool,
        block: Block | None = None,
    ) -> None:
        """Every attribute, on ``block`` (taken from ``pool`` for ``stream``; the caller's if given,
        which the array then owns)."""
        if block is None:
            nbytes = storage_size * dtype.itemsize
            # The block first: after an acquire that raised, __del__ finds no _block, nothing to give back.
            state = stream._state if stream is not None else None
            block = pool.acquire(nbytes, state) if nbytes else pool.empty_block
        self._block = block
        self.backend = ctx.name
        self.shape = shape  # one attribute a statement: no tuple is packed and unpacked
        self.dtype = dtype
        self._strides = strides
        self.offset = offset
        self.storage_size = storage_size
        self._pool = pool
        self._stream = stream
        self._last_descriptor = self._readers = self._written_at = self._base = self._held = None
        self._graphs = None
        self._views = 0

    # -- properties ---------------------------------------------------------
    @property
    def ptr(self) -> int:
        """Device address of the storage base (0 for an empty array)."""
        block = self._block
        if block is _CLOSED:
            raise _closed_error()
        return block.ptr

    @property
    def device(self) -> int:
        """The device the memory lives on."""
        return self._pool.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes of one element (NumPy's ``itemsize``)."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements: ``size * itemsize`` (NumPy's ``nbytes``; a view counts its own)."""
        return prod(self.shape) * self.dtype.itemsize

    @property
    def storage_nbytes(self) -> int:
        """Bytes of the storage the array lies in (``storage_size * itemsize``; a view's whole base)."""
        return self.storage_size * self.dtype.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Bytes to step in each dimension, as NumPy and CuPy report them (``aclCreateTensor``
        counts elements: divide by :attr:`itemsize`)."""
        itemsize = self.dtype.itemsize
        return tuple(s * itemsize for s in self._strides)

    @property
    def closed(self) -> bool:
        """True after close(), or once finalize() freed the memory under it."""
        return self._block.gone

    def is_contiguous(self) -> bool:
        return self.offset == 0 and self._strides == _dtypes.contiguous_strides(self.shape)

    # -- conversion ---------------------------------------------------------
    @property
    def stream(self) -> Stream | None:
        """The stream of the last call that wrote this array or a view of the same memory (calls
        that read it on other streams since run together; :meth:`numpy` and :meth:`close` wait
        for those too)."""
        root = self if self._base is None else self._base
        if root._graphs is not None:
            _settle(root)  # a replay since the last use is the last write
        return root._stream

    def numpy(self) -> npt.NDArray[_S]:
        """A NumPy copy of the array: waits for the work queued on it, then ``aclrtMemcpy`` to the host.

        Raises
        ------
        AclError
            When that work failed on the device (the error of ``Stream.synchronize``).
        """
        self._check_open()
        stream = self.stream
        if _captures.active:  # a host read during a capture: refused before CANN would
            _captures.refuse(
                stream._state if stream is not None else None,
                self.backend,
                self.device,
                "DeviceArray.numpy()",
                "it waits for the device and copies to the host (aclrtMemcpy), which a capture "
                "cannot record; read the array after the capture (and after a replay)",
            )
        # only the elements the array spans, not its whole block (a view of a large base)
        size = self.size
        extent = 1 + sum((d - 1) * s for d, s in zip(self.shape, self._strides)) if size else 0
        if _timeline.recording:  # the one check when nothing is profiled (pyaclnn.profile)
            state = stream._state if stream is not None else None
            storage: np.ndarray = _timeline.timed(
                "DeviceArray.numpy",
                state,
                self._read,
                stream,
                self.offset,
                extent,
                nbytes=extent * self.dtype.itemsize,
            )
        else:
            storage = self._read(stream, self.offset, extent)
        if extent == size and (size == 0 or self._strides == _dtypes.contiguous_strides(self.shape)):
            return storage.reshape(self.shape)
        view = np.lib.stride_tricks.as_strided(
            storage, shape=self.shape, strides=self.strides, writeable=False
        )
        return np.array(view)

    def _read(self, stream: Stream | None, start: int, count: int) -> np.ndarray:
        """Elements ``[start, start + count)`` of the array's storage copied to the host once
        ``stream``'s queued work is done."""
        if stream is not None:
            stream._state.wait_queued()
        root = self if self._base is None else self._base
        for reader in root._readers or ():  # every pending use, as the docs promise
            reader._state.wait_queued()
        storage = np.empty(count, dtype=self.dtype)
        nbytes = storage.nbytes
        if nbytes:
            # as bytes: the buffer protocol has no format for bfloat16
            with _context.context(self.backend).on_device(self.device):
                source = self.ptr + start * self.dtype.itemsize
                acl.rt.memcpy(storage.view(np.uint8), nbytes, source, nbytes, _D2H, backend=self.backend)
        return storage

    def descriptor(self, fmt: int) -> Any:
        """The aclTensor describing this array with format ``fmt``.

        Cached with the memory block and freed with it: never destroy it yourself.
        """
        last = self._last_descriptor
        if last is not None and last[0] == fmt and last[1] is self._block and not last[1].gone:
            return last[2]  # the same array asked again (an input reused across calls)
        block = self._block
        if block.gone:
            raise _closed_error()
        key = (self.shape, self._strides, self.offset, self.dtype, fmt, self.storage_size)
        handle = block.descriptors.get(key)  # a reused block usually has it
        if handle is None:
            handle = self._new_descriptor(block, key, fmt)
        self._last_descriptor = (fmt, block, handle)
        return handle

    def _new_descriptor(self, block: Block, key: tuple[Any, ...], fmt: int) -> Any:
        """The descriptor for ``key`` from the pool, which creates it, checking again under its lock.

        Apart from :meth:`descriptor`, whose usual case then needs no closure over ``self``.
        """
        return self._pool.descriptor(block, key, lambda: self._create_descriptor(fmt))

    def _create_descriptor(self, fmt: int) -> Any:
        return acl.create_tensor(
            self.shape,
            _dtypes.from_numpy(self.dtype),
            self._strides,
            self.offset,
            fmt,
            (self.storage_size,),
            self.ptr,
            backend=self.backend,
        )

    def fill_zero(self, stream: Stream | None = None) -> None:
        """Set the array's elements to zero: ``aclrtMemsetAsync`` on ``stream`` (by default the
        array's stream, else the calling thread's current stream). A strided view is zeroed
        through :meth:`copy_` and leaves the rest of its base alone."""
        self._check_open()
        if stream is None:
            last = self.stream
            stream = last if last is not None and not last.closed else None
            stream = stream or current(_context.context(self.backend), self.device)
        if self._strides != _dtypes.contiguous_strides(self.shape):
            self.copy_(np.zeros((), self.dtype), stream)
            return
        self._use_on(stream)
        nbytes = self.nbytes  # a view of part of its base: only its own elements
        if nbytes:
            state = stream._state
            start = self.ptr + self.offset * self.dtype.itemsize
            state.enqueue(acl.rt.memset_async, start, nbytes, 0, nbytes, state.handle)
            self._written_after(stream)
            if state.capture is not None:  # the graph's replays write it: it keeps the array
                state.capture.hold((self,))

    def copy_(
        self, src: npt.NDArray[Any] | DeviceArray[Any], stream: Stream | None = None
    ) -> DeviceArray[_S]:
        """Copy ``src`` into this array, queued on ``stream``; returns this array (torch's ``copy_``).

        ``src`` is broadcast to this array's shape and cast to its dtype, as torch's
        ``copy_`` does. The same shape and dtype, both contiguous, is a plain copy:
        ``aclrtMemcpyAsync`` from host memory for a NumPy ``src`` (which returns once
        the data has left it, so ``src`` may change afterwards), device to device for a
        DeviceArray. Anything else (a strided source or destination, a broadcast, another
        dtype) runs the operator ``aclnnInplaceCopy`` on the device, a NumPy ``src`` first
        uploaded. Either way the copy is ordered after the work that used ``src``.

        Parameters
        ----------
        src : ndarray or DeviceArray
        stream : Stream, optional
            By default the stream of this array's last use, if open, else the calling
            thread's current stream of its device.

        Raises
        ------
        TypeError
            For a ``src`` that is not an array (a list, a torch tensor), or of a dtype
            without an aclDataType.
        ValueError
            For a ``src`` shape that does not broadcast to this array's, a closed array or
            stream, a stream, ``src`` or this array on another backend or device, or a
            device ``src`` whose memory overlaps this array's.
        pyaclnn.AclnnError
            When ``aclnnInplaceCopy`` refuses the copy (a dtype it does not cast).
        """
        self._check_open()
        stream = self._default_stream(stream)
        if isinstance(src, DeviceArray):
            if src.backend != self.backend or src.device != self.device:
                raise ValueError(
                    f"src lives on backend {src.backend!r} device {src.device}, this array on "
                    f"{self.backend!r} device {self.device}: copy through src.numpy()"
                )
            src._check_open()
            if _byte_ranges_overlap(src, self):
                raise ValueError("src overlaps this array's memory: copy through a temporary")
        else:
            src = host_array("src", src)
        try:
            shape = tuple(np.broadcast_shapes(src.shape, self.shape))
        except ValueError:
            shape = None
        if shape != self.shape:
            raise ValueError(
                f"src has shape {list(src.shape)}, which does not broadcast to {list(self.shape)}"
            )
        dense = _dtypes.contiguous_strides(self.shape)  # an offset is fine: the copy starts there
        plain = src.shape == self.shape and src.dtype == self.dtype and self._strides == dense
        if isinstance(src, DeviceArray) and src._strides != _dtypes.contiguous_strides(src.shape):
            plain = False
        if not plain:
            if isinstance(src, DeviceArray):
                return self._inplace_copy(src, stream)
            if _captures.active:
                _captures.refuse(
                    stream._state,
                    self.backend,
                    self.device,
                    "DeviceArray.copy_(src=NumPy array)",
                    _captures.PAGEABLE,
                )
            with to_device(src, backend=self.backend, stream=stream) as uploaded:
                return self._inplace_copy(uploaded, stream)
        start = self.ptr + self.offset * self.dtype.itemsize
        nbytes = self.size * self.dtype.itemsize
        state = stream._state
        if isinstance(src, DeviceArray):
            source = src.ptr + src.offset * src.dtype.itemsize
            src._use_on(stream, write=False)
            self._use_on(stream)
            if nbytes:
                state.enqueue(acl.rt.memcpy_async, start, nbytes, source, nbytes, _D2D, state.handle)
                self._written_after(stream)
                if state.capture is not None:  # the graph's replays use both: it keeps them
                    state.capture.hold((self, src))
        else:
            if _captures.active:
                _captures.refuse(
                    state, self.backend, self.device, "DeviceArray.copy_(src=NumPy array)", _captures.PAGEABLE
                )
            host = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
            self._use_on(stream)
            if nbytes:
                state.enqueue(acl.rt.memcpy_async, start, nbytes, host, nbytes, _H2D, state.handle)
                self._written_after(stream)
        return self

    def _default_stream(self, stream: Stream | None) -> Stream:
        """``stream`` checked, or by default the stream of this array's last use if open, else the
        calling thread's current stream of its device."""
        ctx = _context.context(self.backend)
        if stream is None:
            last = self.stream
            stream = last if last is not None and not last.closed else None
            stream = stream or current(ctx, self.device)
        require_stream_on(stream, self.backend, self.device)
        if stream.closed:
            raise ValueError("stream is closed")
        return stream

    def _inplace_copy(self, src: DeviceArray[Any], stream: Stream) -> DeviceArray[_S]:
        """``aclnnInplaceCopy(self, src)`` on ``stream``: broadcast, cast, any strides."""
        _run_operator("inplace_copy", "aclnn_copy.h", stream, (self, src), (self, src), (self,))
        return self

    def astype(self, dtype: Any, stream: Stream | None = None) -> DeviceArray[Any]:
        """A new contiguous array of this one's values cast to ``dtype`` (NumPy's ``astype``: a copy
        also when the dtype is the same), computed by ``aclnnCast`` on ``stream`` (by default as
        :meth:`copy_` chooses it).

        Raises
        ------
        TypeError
            For a dtype without an aclDataType.
        pyaclnn.AclnnError
            When ``aclnnCast`` refuses the cast.
        """
        self._check_open()
        target = _dtypes.as_dtype(dtype)
        data_type = _dtypes.from_numpy(target)
        stream = self._default_stream(stream)
        out: DeviceArray[Any] = DeviceArray(self.shape, target, backend=self.backend, stream=stream)
        try:
            if target == self.dtype:
                return out.copy_(self, stream)
            _run_operator("cast", "aclnn_cast.h", stream, (self, data_type, out), (self, out), (out,))
        except BaseException:
            out.close()
            raise
        return out

    def copy(self, stream: Stream | None = None) -> DeviceArray[_S]:
        """A new contiguous array with this one's values (queued on ``stream``, see :meth:`copy_`)."""
        self._check_open()
        stream = self._default_stream(stream)
        out: DeviceArray[_S] = DeviceArray(self.shape, self.dtype, backend=self.backend, stream=stream)
        try:
            return out.copy_(self, stream)
        except BaseException:
            out.close()
            raise

    def contiguous(self, stream: Stream | None = None) -> DeviceArray[_S]:
        """This array if it is contiguous (from its storage's start), else a contiguous copy
        (torch's ``contiguous``)."""
        self._check_open()
        return self if self.is_contiguous() else self.copy(stream)

    def reshape(self, *shape: int | Sequence[int]) -> DeviceArray[_S]:
        """A view of the same memory with another shape (NumPy's ``reshape``; one -1 is inferred).

        The array must be contiguous (an offset is fine). The view and this array
        are one array to the streams: work on either is ordered after work on both,
        and the memory is given back when both are closed, in whichever order.

        Raises
        ------
        TypeError
            For a shape that is not ints.
        ValueError
            For a closed or non-contiguous array, more than one -1, or a shape with
            another number of elements.
        """
        self._check_open()
        items: Any = shape[0] if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) else shape
        new = _inferred_shape(items, self.size)
        if self._strides != _dtypes.contiguous_strides(self.shape):
            raise ValueError(
                f"reshape needs a contiguous array (shape {list(self.shape)}, strides "
                f"{list(self.strides)} bytes): copy it into a contiguous one first (empty_like + copy_)"
            )
        return self._view(new, _dtypes.contiguous_strides(new), self.offset)

    def _view(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> DeviceArray[_S]:
        """A view of this array's block with ``shape``, element ``strides`` and ``offset``: one
        array to the streams with it, the memory given back when all of them are closed."""
        root = self if self._base is None else self._base
        view: DeviceArray[_S] = DeviceArray.__new__(DeviceArray)
        view.backend, view.dtype, view._pool, view._block = self.backend, self.dtype, self._pool, self._block
        view.shape, view._strides, view.offset = shape, strides, offset
        view.storage_size = self.storage_size
        view._last_descriptor = view._stream = view._readers = view._written_at = view._held = None
        view._graphs = None  # the base's count
        view._views = 0
        view._base = root
        with _VIEWS_LOCK:
            root._views += 1
        return view

    def __getitem__(self, key: Any) -> DeviceArray[_S]:
        """A view of the same memory (NumPy's basic indexing): ints, slices of positive step,
        ``...`` and ``None``. An int gives a 0-d view, not a scalar (read it with :meth:`numpy`).

        Raises
        ------
        TypeError
            For other index kinds (arrays, lists, bools, floats).
        IndexError
            For an int out of range, or more indices than dimensions.
        ValueError
            For a negative or zero slice step, or a closed array.
        """
        self._check_open()
        shape, strides, offset = _indexed(key, self.shape, self._strides, self.offset)
        return self._view(shape, strides, offset)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d DeviceArray)")
        return self.shape[0]

    def __iter__(self) -> Iterator[DeviceArray[_S]]:
        """Views of the array along its first axis (TypeError for a 0-d array, as NumPy)."""
        for i in range(len(self)):
            yield self[i]

    def transpose(self, *axes: int | Sequence[int]) -> DeviceArray[_S]:
        """A view with the axes permuted (NumPy's ``transpose``: reversed when none are given).

        Raises
        ------
        TypeError
            For axes that are not ints.
        ValueError
            For axes that are not a permutation of the array's, or a closed array.
        """
        self._check_open()
        items: Any = axes[0] if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)) else axes
        ndim = len(self.shape)
        order = tuple(range(ndim))[::-1] if items is None or len(items) == 0 else _axes(items, ndim)
        return self._view(
            tuple(self.shape[a] for a in order), tuple(self._strides[a] for a in order), self.offset
        )

    @property
    def T(self) -> DeviceArray[_S]:  # noqa: N802 - NumPy's name
        """The array with its axes reversed: a view (``transpose()``)."""
        return self.transpose()

    def _ordered_for(self, stream: Stream, write: bool) -> bool:
        """True when a use on ``stream`` needs no :meth:`_use_on`: no graph holds the array (a
        replay since may be its last write, whatever ``_stream`` says), its last write is
        ordered for ``stream`` already and, for a write, no other stream reads it. (A view keeps
        no streams of its own: it always takes :meth:`_use_on`, which reads its base's.)"""
        if self._graphs is not None:
            return False
        if write:
            return self._stream is stream and self._readers is None
        return self._stream is stream or (self._readers is not None and stream in self._readers)

    def _use_on(self, stream: Stream, write: bool = True) -> None:
        """Order work queued on ``stream`` from now on after the work on this array it must follow:
        a read (``write=False``) after the last write; a write after the last write and every
        read since, and it becomes the last write. A wrong ``write=False`` loses data: pass it
        only for an argument the operator is known to read only."""
        root = self if self._base is None else self._base  # the base keeps the streams for both
        if root._graphs is not None:  # held by graphs: their replays since count, the next follow
            _settle(root, stream)
        writer = root._stream
        readers = root._readers  # replaced, never changed: read without the lock
        state = stream._state
        ordered = writer is stream or (readers is not None and stream in readers)  # after the write
        if not ordered and writer is not None:
            _follow(state, writer._state, root._written_at)
        if not write:
            if ordered:
                return
            with _ORDER_LOCK:  # after the wait was queued
                readers = root._readers
                if root._stream is not stream and (readers is None or stream not in readers):
                    root._readers = (stream,) if readers is None else (*readers, stream)
            return
        for reader in readers or ():
            if reader is not stream:
                _follow(state, reader._state)
        with _ORDER_LOCK:  # after the waits were queued; readers added meanwhile stay
            root._stream = stream
            root._written_at = None  # known once the write is queued (_written_after)
            now = root._readers
            if now is not readers and now is not None:
                now = tuple(r for r in now if r is not stream and (readers is None or r not in readers))
                root._readers = now or None
            else:
                root._readers = None

    def _written_after(self, stream: Stream) -> None:
        """The write on ``stream`` that :meth:`_use_on` ordered was queued: remember up to which
        count of the stream's work it goes, so reads elsewhere wait for nothing once it is done."""
        writes_queued(stream, (self,))

    def close(self) -> None:
        """Give the memory back (to the pool, for the stream that used it last); a second call does nothing.

        A wrapper of memory pyaclnn does not own (:meth:`from_ptr`) first waits for the
        work pyaclnn queued on it (its owner may free the memory next), then drops its
        descriptors. While views of the array (:meth:`reshape`) are open, the memory stays
        for them: the last of them to close gives it back.
        """
        block = self._block
        # The usual array first (an output closed after its call): a block of the pool, read on
        # no other stream, held by no graph, no view and viewed by none. (A closed or empty
        # array's block goes to the pool too, which takes it back once only, a block with memory.)
        if (
            type(block) is Block
            and self._readers is None
            and self._graphs is None
            and self._base is None
            and not self._views
        ):
            self._block = _CLOSED
            stream = self._stream
            self._pool.release(block, None if stream is None else stream._state)
            return
        if self._graphs is not None:  # (a base) a replay since its last use is its last use; the
            _settle(self, closing=not self._views)  # memory goes back unless views keep it
        if self._base is not None or self._views:
            if not self._close_shared():
                return
        block = self._block
        self._block = _CLOSED
        if not block.nbytes:
            return  # an empty array, or closed already
        readers = self._readers
        if type(block) is ForeignBlock:
            try:
                if self._stream is not None:
                    self._stream._state.wait_queued()
                for reader in readers or ():
                    reader._state.wait_queued()
            finally:
                self._pool.forget_foreign(block)
            return
        stream = self._stream
        state = stream._state if stream is not None else None
        if readers:
            # The block goes back to one stream, which reuses it at once: that stream is first
            # ordered after the other readers (on the device; on the host for those it cannot).
            state, left = self._pool.join(state, [r._state for r in readers])
            for reader_state in left:
                reader_state.wait_queued()
        # The pool decides under its lock whether the stream is still open (a close may race this).
        self._pool.release(block, state)

    def _close_shared(self) -> bool:
        """close() of an array that shares its block: whether the block is to be given back now."""
        base = self._base
        if base is None:  # views are open: keep the block for them
            with _VIEWS_LOCK:
                if self._views:
                    if self._block is not _CLOSED:
                        self._held, self._block = self._block, _CLOSED
                    return False
            return True
        if self._block is _CLOSED:
            return False
        self._block, self._last_descriptor = _CLOSED, None
        with _VIEWS_LOCK:
            base._views -= 1
            held = base._held if base._views == 0 else None
            if held is not None:
                base._block, base._held = held, None
        if held is not None:
            base.close()  # the base was closed while views were open: now its memory goes back
        return False

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # As CuPy: converting device memory to NumPy is a copy (and a wait), so it is asked for by name.
        raise TypeError(
            "a pyaclnn.DeviceArray is not converted implicitly to a NumPy array: call .numpy() "
            "(it waits for the work queued on the array and copies it to the host)"
        )

    def __del__(self) -> None:
        try:
            if self._block is _CLOSED:
                return  # closed already (the common case)
        except AttributeError:
            return  # never set up (its __init__ or acquire raised)
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer must not raise (e.g. at interpreter exit)
            pass

    def _check_open(self) -> None:
        if self.closed:
            raise _closed_error()

    def __enter__(self) -> DeviceArray[_S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<pyaclnn.DeviceArray shape={self.shape} dtype={self.dtype} backend={self.backend!r}{state}>"


def writes_queued(
    stream: Stream, written: Sequence[DeviceArray[Any]], more: Sequence[DeviceArray[Any]] | None = None
) -> None:
    """:meth:`DeviceArray._written_after` of every array of ``written`` and ``more``, under one
    taking of the lock: what a launch calls once its writes were queued."""
    lock = _ORDER_LOCK  # explicit calls in try/finally: a ``with`` costs about as much again
    lock.acquire()
    try:
        queued = stream._state.queued
        for array in (*written, *more) if more else written:
            if array._base is not None:
                array = array._base  # the base keeps the streams of its views
            if array._stream is stream:  # (another stream's write may have come since)
                array._written_at = queued
    finally:
        lock.release()


_CLOSED = Block(0, 0)  # the block of every closed array: no memory, gone
_CLOSED.in_use = False
_CLOSED.gone = True


class ForeignBlock(Block):
    """Memory another library owns, wrapped by :meth:`DeviceArray.from_ptr`: never freed by pyaclnn."""

    __slots__ = ("owner",)

    def __init__(self, ptr: int, nbytes: int, owner: Any) -> None:
        super().__init__(ptr, nbytes)
        self.owner = owner  # kept alive as long as the wrapper


_INT_ONLY = frozenset({int})


def _shape(values: Any, name: str = "shape") -> tuple[int, ...]:
    """``values`` as a tuple of ints >= 0, or an error naming ``name`` and the rule."""
    # The usual shape, a tuple of plain ints >= 0, as it is: tested in C (no generator per call).
    if type(values) is tuple and frozenset(map(type, values)) <= _INT_ONLY and min(values, default=0) >= 0:
        return values
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = (values,)
    try:
        items = tuple(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints, got {describe(values)}") from None
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in items):
        raise TypeError(f"{name} must be a sequence of ints, got {describe(values)}")
    if any(v < 0 for v in items):
        raise ValueError(f"{name} {list(map(int, items))} has a negative value; every value must be >= 0")
    return tuple(int(v) for v in items)


def _axes(values: Any, ndim: int) -> tuple[int, ...]:
    """``values`` as a permutation of ``range(ndim)`` (negative axes count from the end)."""
    try:
        items = tuple(values)
    except TypeError:
        raise TypeError(f"axes must be ints, got {describe(values)}") from None
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in items):
        raise TypeError(f"axes must be ints, got {describe(values)}")
    order = tuple(int(v) + ndim if -ndim <= v < 0 else int(v) for v in items)
    if sorted(order) != list(range(ndim)):
        raise ValueError(f"axes {list(items)} are not a permutation of the {ndim} axes")
    return order


def _indexed(
    key: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The shape, element strides and offset of ``array[key]`` for NumPy's basic indexing of ints,
    slices of positive step, ``...`` and ``None``; the error naming the rule for anything else."""
    items = key if isinstance(key, tuple) else (key,)
    accepted = "ints, slices of positive step, ... and None"
    for item in items:
        if isinstance(item, bool) or not (
            item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer))
        ):
            raise TypeError(
                f"a DeviceArray is indexed by {accepted} (views of the same memory), got "
                f"{describe(item)}: for a gather, use pyaclnn.ops or index the NumPy copy (.numpy())"
            )
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(item is not None and item is not Ellipsis for item in items)
    if used > len(shape):
        raise IndexError(f"too many indices: {used} for the {len(shape)} dimensions of shape {list(shape)}")
    if Ellipsis in items:
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        items = (*items[:at], *(slice(None),) * (len(shape) - used), *items[at + 1 :])
    else:
        items = (*items, *(slice(None),) * (len(shape) - used))
    new_shape: list[int] = []
    new_strides: list[int] = []
    axis = 0
    for item in items:
        if item is None:
            new_shape.append(1)
            new_strides.append(0)
            continue
        dim, stride = shape[axis], strides[axis]
        axis += 1
        if isinstance(item, slice):
            if (
                item.step is not None
                and not isinstance(item.step, bool)
                and not isinstance(item.step, (int, np.integer))
            ):
                raise TypeError(f"slice steps must be ints, got {describe(item.step)}")
            if item.step is not None and item.step <= 0:
                raise ValueError(
                    f"slice step {item.step}: a DeviceArray view takes steps > 0 only (an aclTensor "
                    "has no negative strides); reverse with pyaclnn.ops (flip) or on the NumPy copy"
                )
            start, _, step = item.indices(dim)
            count = len(range(*item.indices(dim)))
            if count:
                offset += start * stride
            new_shape.append(count)
            new_strides.append(stride * step)
        else:
            index = int(item)
            if not -dim <= index < dim:
                raise IndexError(f"index {index} is out of bounds for axis {axis - 1} with size {dim}")
            offset += (index + dim if index < 0 else index) * stride
    return tuple(new_shape), tuple(new_strides), offset


def _inferred_shape(values: Any, size: int) -> tuple[int, ...]:
    """``values`` as a shape of ``size`` elements, one -1 standing for what is left."""
    try:
        items = tuple(values)
    except TypeError:
        raise TypeError(f"shape must be ints, got {describe(values)}") from None
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in items):
        raise TypeError(f"shape must be ints, got {describe(values)}")
    unknown = [i for i, v in enumerate(items) if v == -1]
    if len(unknown) > 1 or any(v < -1 for v in items):
        raise ValueError(f"shape {list(items)}: at most one -1, and no other negative value")
    known = prod(int(v) for v in items if v != -1)
    shape = [int(v) for v in items]
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"shape {list(items)} cannot hold the array's {size} elements")
        shape[unknown[0]] = size // known
    if prod(shape) != size:
        raise ValueError(f"shape {list(items)} has {prod(shape)} elements, the array {size}")
    return tuple(shape)


def _byte_ranges_overlap(a: DeviceArray[Any], b: DeviceArray[Any]) -> bool:
    """Whether the bytes ``a`` and ``b`` span intersect (by bounds, as ``np.may_share_memory``)."""
    if a.size == 0 or b.size == 0:
        return False
    spans = []
    for x in (a, b):
        extent = 1 + sum((d - 1) * s for d, s in zip(x.shape, x._strides))
        start = x.ptr + x.offset * x.dtype.itemsize
        spans.append((start, start + extent * x.dtype.itemsize))
    return spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]


def _run_operator(
    python_name: str,
    header: str,
    stream: Stream,
    args: tuple[Any, ...],
    arrays: tuple[DeviceArray[Any], ...],
    outputs: tuple[DeviceArray[Any], ...],
) -> None:
    """Queue an operator of the backend's catalogue (``pyaclnn.ops``' own: phase 1 every time) on
    ``stream``, with ``args`` in header order (DeviceArrays given as themselves, described in
    ND), ordered after the work that used ``arrays``."""
    backend = arrays[0].backend
    declaration = _generic.catalogue(backend).find(python_name, header)
    if declaration is None:
        raise LookupError(f"no operator header of the {backend} backend declares {python_name} ({header})")
    op = _generic.operator(declaration, backend)
    state = stream._state
    with state.on_device():
        for array in arrays:  # the outputs are written; the others only read
            array._use_on(stream, any(array is o for o in outputs))
        c_args = tuple(a.descriptor(_dtypes.ACL_FORMAT_ND) if isinstance(a, DeviceArray) else a for a in args)
        state.executors.launch(Call(op, c_args, False, outputs))
    for array in outputs:
        array._written_after(stream)
    if state.capture is not None:  # the graph's replays use them: it keeps them
        state.capture.hold(arrays)


class ReplayOrder:
    """The replays of one graph as the arrays it holds see them: bookkeeping per graph, not per array.

    A replay counts as writing every array its graph holds. Rather than recording that
    on each array (a host cost in proportion to the graph), the replay records itself
    here once: the stream it was queued on and the count of that stream's work once it
    was (:meth:`replayed`). Each array holds the orders of its graphs
    (``DeviceArray._graphs``) and takes the replays queued since its last use in at its
    next use, read, close or :attr:`~DeviceArray.stream` (:func:`_settle`): the latest
    becomes its last write, so what follows waits for it. Each eager use of a held array
    (a call, ``copy_``, ``fill_zero``, a close) adds its stream to :attr:`since`, which the
    next replay follows: a replay costs one order per stream that used the graph's arrays,
    not one per array.

    Lock discipline: the fields change under ``_ORDER_LOCK``, :attr:`since` and
    :attr:`sharing` are replaced, never changed in place, so a replay reads them without it.
    """

    __slots__ = ("count", "sequence", "stream", "point", "since", "sharing", "pool", "closed_input")

    def __init__(self, pool: MemoryPool) -> None:
        self.count = 0  # replays queued so far
        self.sequence = 0  # the last replay's place among every graph's replays (_REPLAYS)
        self.stream: Stream | None = None  # the stream of the last replay
        self.point: int | None = None  # the count of work queued there once that replay was queued
        self.since: tuple[Stream, ...] = ()  # streams that used an array of the graph since
        self.sharing: tuple[ReplayOrder, ...] = ()  # the other live graphs holding one of its arrays
        self.pool = pool  # the graph's own memory: closing an array of it is no closed input
        self.closed_input: DeviceArray[Any] | None = None  # an input the replays read (not the graph's
        # memory), closed: its memory may hold other data now

    def link(self, arrays: Iterable[DeviceArray[Any]]) -> None:
        """The graph's capture ended, holding ``arrays``: they count its replays from now on, and the
        first replay follows the streams that used them last."""
        roots = {id(r): r for r in (a if a._base is None else a._base for a in arrays)}.values()
        since: dict[Stream, None] = {}
        for root in roots:
            if root._graphs is not None:
                _settle(root)  # other graphs' replays first: they may be the last use
            with _ORDER_LOCK:
                graphs = dict(root._graphs or {})
                for other in graphs:
                    if other not in self.sharing:
                        self.sharing = (*self.sharing, other)
                        other.sharing = (*other.sharing, self)
                graphs[self] = 0
                root._graphs = graphs
                for stream in (root._stream, *(root._readers or ())):
                    if stream is not None:
                        since[stream] = None
            if root.closed and root._pool is not self.pool:
                self.closed_input = root
        self.since = tuple(since)

    def unlink(self, arrays: Iterable[DeviceArray[Any]]) -> None:
        """The graph is closed and its replays are done: ``arrays`` count them no longer."""
        for array in arrays:
            root = array if array._base is None else array._base
            if root._graphs is not None:
                _settle(root)  # the replays happened: the array's last use is the latest
            with _ORDER_LOCK:
                graphs = root._graphs
                if graphs is not None and self in graphs:
                    graphs = dict(graphs)
                    del graphs[self]
                    root._graphs = graphs or None
        with _ORDER_LOCK:
            for other in self.sharing:
                other.sharing = tuple(o for o in other.sharing if o is not self)
            self.sharing = ()

    def follow(self, state: StreamState) -> None:
        """Order work queued on ``state`` from now on (a replay) after the last replay and every use
        of the graph's arrays since, on other streams."""
        last = self.stream
        if last is not None and last._state is not state:
            _follow(state, last._state, self.point)
        for stream in self.since:
            if stream._state is not state:
                _follow(state, stream._state)

    def replayed(self, stream: Stream) -> None:
        """A replay was queued on ``stream``: it is now the last write of every array of the graph,
        and a use of them for the graphs sharing one (their next replay follows it)."""
        with _ORDER_LOCK:
            self.count += 1
            self.sequence = next(_REPLAYS)
            self.stream = stream
            self.point = stream._state.queued
            self.since = ()
            for other in self.sharing:
                if stream not in other.since:
                    other.since = (*other.since, stream)


_REPLAYS = itertools.count(1)  # the order of replays of every graph (for arrays several graphs hold)


def _settle(root: DeviceArray[Any], stream: Stream | None = None, closing: bool = False) -> None:
    """Take the replays of ``root``'s graphs queued since its last use in (the latest is its last
    write, the others that ran beside it its readers), then note a use on ``stream`` (or, when
    ``closing``, the close of an input the graphs read), which their next replays follow."""
    with _ORDER_LOCK:
        graphs = root._graphs
        if graphs is None:
            return
        latest: ReplayOrder | None = None
        also: list[Stream] = []
        for order, seen in graphs.items():
            if order.count != seen:
                graphs[order] = order.count
                if latest is None or order.sequence > latest.sequence:
                    if latest is not None:
                        also.append(latest.stream)  # type: ignore[arg-type]
                    latest = order
                else:
                    also.append(order.stream)  # type: ignore[arg-type]
        if latest is not None:  # each replay followed every use noted before it
            root._stream = latest.stream
            root._written_at = latest.point
            readers = tuple(dict.fromkeys(s for s in also if s is not latest.stream))
            root._readers = readers or None
        for order in graphs:
            if stream is not None and stream not in order.since:
                order.since = (*order.since, stream)
            if closing and root._pool is not order.pool and order.closed_input is None:
                order.closed_input = root


def _follow(state: StreamState, other: StreamState, point: int | None = None) -> None:
    """Order work queued on ``state`` from now on after the work queued on ``other`` so far, if the
    use it follows is pending: the work up to count ``point`` of ``other``, or (None) any work."""
    if other.open and (other.queued != other.done if point is None else other.done < point):
        state.wait_for(other)


def _closed_error() -> ValueError:
    return ValueError("DeviceArray is closed: its device memory was given back")


def _pool_of(ctx: _context._Context, stream: Stream | None, device: int | None) -> MemoryPool:
    """The memory pool for an array on ``device`` (default: ``stream``'s, else the current one)."""
    if stream is not None:
        if device is not None and device != stream.device:
            raise ValueError(f"device {device} differs from the device {stream.device} of stream {stream!r}")
        return stream._state.pool
    return ctx.device_pool(ctx.device if device is None else _context._device_id(device, ctx))


def _capturing_pool(ctx: _context._Context, pool: MemoryPool) -> MemoryPool:
    """For an array made for no stream while a capture runs: the graph's pool if the thread's
    current stream of ``pool``'s device captures (the calls of the block go there), else ``pool``."""
    state = current(ctx, pool.device)._state
    return state.pool if state.capture is not None else pool


@functools.lru_cache(maxsize=1024)
@functools.lru_cache(maxsize=1024)  # every output of every call: one C call for the usual shapes
def _contiguous_layout(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """Strides and element count of a contiguous array of ``shape``."""
    return _dtypes.contiguous_strides(shape), prod(shape)


# The constructors' overloads, each written once: empty()'s and zeros() (``_Constructor``) and their
# _like forms' (``_LikeConstructor``), which the functions take through an identity decorator that
# makes mypy check each implementation against them.
if TYPE_CHECKING:
    from typing import Protocol

    class _Constructor(Protocol):
        @overload
        def __call__(self, shape: Sequence[int], **where: Unpack[_Placement]) -> DeviceArray[np.float32]: ...
        @overload
        def __call__(
            self, shape: Sequence[int], dtype: DTypeOf[_T], **where: Unpack[_Placement]
        ) -> DeviceArray[_T]: ...
        @overload
        def __call__(
            self, shape: Sequence[int], dtype: OtherDType, **where: Unpack[_Placement]
        ) -> DeviceArray[Any]: ...

    class _LikeConstructor(Protocol):
        @overload
        def __call__(
            self, a: DeviceArray[_T] | npt.NDArray[_T], dtype: None = None, **where: Unpack[_Placement]
        ) -> DeviceArray[_T]: ...
        @overload
        def __call__(
            self, a: DeviceArray[Any] | npt.NDArray[Any], dtype: DTypeOf[_T], **where: Unpack[_Placement]
        ) -> DeviceArray[_T]: ...
        @overload
        def __call__(
            self, a: DeviceArray[Any] | npt.NDArray[Any], dtype: OtherDType, **where: Unpack[_Placement]
        ) -> DeviceArray[Any]: ...


def _constructor(fn: _Constructor) -> _Constructor:
    """``fn`` itself, typed (and checked by mypy) as :class:`_Constructor`."""
    return fn


def _like_constructor(fn: _LikeConstructor) -> _LikeConstructor:
    """``fn`` itself, typed (and checked by mypy) as :class:`_LikeConstructor`."""
    return fn


# empty() and zeros() take the same arguments on purpose (as NumPy's do): zeros is empty plus a fill
# (_zero_filled), as zeros_like is empty_like plus one.
@_constructor
def empty(
    shape: Sequence[int],
    dtype: Any = np.float32,
    *,
    backend: str | None = None,
    stream: Stream | None = None,
    device: int | None = None,
) -> DeviceArray[Any]:
    """An uninitialised contiguous DeviceArray (for work on ``stream``, if given; on ``device``,
    by default the stream's or the thread's current one).

    To type checkers ``empty(shape, np.float16)`` is a ``DeviceArray[np.float16]``
    (``DeviceArray[np.float32]`` without a dtype); a dtype named by a string is
    ``DeviceArray[Any]``.

    Raises
    ------
    TypeError
        If ``shape`` is not a sequence of ints, or for a dtype ACL has no name for.
    ValueError
        For a negative dimension, or a stream of another device.
    """
    return DeviceArray(shape, _dtypes.as_dtype(dtype), backend=backend, stream=stream, device=device)


@_like_constructor
def empty_like(
    a: DeviceArray[Any] | npt.NDArray[Any],
    dtype: Any = None,
    *,
    backend: str | None = None,
    stream: Stream | None = None,
    device: int | None = None,
) -> DeviceArray[Any]:
    """An uninitialised contiguous DeviceArray of ``a``'s shape and dtype (or ``dtype``), on
    ``a``'s backend and device when ``a`` is a DeviceArray (else as :func:`empty`); to type
    checkers of ``a``'s scalar type (or ``dtype``'s), as :func:`empty`."""
    where = _like(a, backend, stream, device)
    return empty(a.shape, a.dtype if dtype is None else dtype, **where)


_MakeArray = TypeVar("_MakeArray", bound="Callable[..., DeviceArray[Any]]")


def _zero_filled(make: _MakeArray, name: str, doc: str) -> _MakeArray:
    """``make`` (:func:`empty` or :func:`empty_like`) plus a zero fill queued on the call's
    ``stream`` (default: the thread's current stream of the array's device): the zeros form,
    with ``make``'s signature and types."""

    @functools.wraps(make)
    def zero_filled(*args: Any, stream: Stream | None = None, **kwargs: Any) -> DeviceArray[Any]:
        array = make(*args, stream=stream, **kwargs)
        try:
            array.fill_zero(stream)
        except BaseException:
            array.close()
            raise
        return array

    zero_filled.__name__ = zero_filled.__qualname__ = name
    zero_filled.__doc__ = doc
    return cast(_MakeArray, zero_filled)


zeros = _zero_filled(
    empty,
    "zeros",
    """A zero-filled contiguous DeviceArray; the fill is queued on ``stream`` (default: the thread's
    current stream of the array's device). Typed as :func:`empty`.""",
)
zeros_like = _zero_filled(
    empty_like,
    "zeros_like",
    """A zero-filled contiguous DeviceArray of ``a``'s shape and dtype (or ``dtype``), on
    ``a``'s backend and device when ``a`` is a DeviceArray (else as :func:`zeros`); typed as
    :func:`empty_like`.""",
)


def _like(a: Any, backend: str | None, stream: Stream | None, device: int | None) -> dict[str, Any]:
    """empty_like's and zeros_like's placement: ``a``'s backend and device unless given."""
    if isinstance(a, DeviceArray):
        backend = a.backend if backend is None else backend
        if device is None and stream is None:
            device = a.device
    elif not isinstance(a, np.ndarray):
        raise TypeError(_not_an_array("a", a))
    return {"backend": backend, "stream": stream, "device": device}


def _covering_storage(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...], int]:
    """What to upload for ``x`` as a 1-D array, and x's strides and offset within it (in elements):
    x's elements, dense; only a broadcast (a zero stride, more elements than memory) keeps its strides."""
    itemsize = x.dtype.itemsize
    if x.flags.c_contiguous:
        return x.reshape(-1), _dtypes.contiguous_strides(x.shape), 0
    if all(s for s, d in zip(x.strides, x.shape) if d > 1) or any(s % itemsize or s < 0 for s in x.strides):
        # the view's elements, not the storage it spans (aclTensor strides are whole,
        # non-negative element counts besides: such views are copied dense too)
        x = np.ascontiguousarray(x)
        return x.reshape(-1), _dtypes.contiguous_strides(x.shape), 0
    strides = tuple(s // itemsize for s in x.strides)
    span_size = 1 + sum(s * (d - 1) for s, d in zip(strides, x.shape))
    first = x[tuple(slice(0, 1) for _ in x.shape)]
    span = np.lib.stride_tricks.as_strided(first, shape=(span_size,), strides=(itemsize,), writeable=False)
    return span, strides, 0


def host_array(name: str, x: Any) -> np.ndarray:
    """``x`` if it is a NumPy array of a dtype ACL names: the one rule for host data given to
    pyaclnn (:func:`to_device`, the operators' inputs, :meth:`DeviceArray.copy_`).

    Raises
    ------
    TypeError
        Naming ``name``: for a list, a torch tensor or anything else that is not an
        ndarray (a list would silently become float64), and for a dtype without an
        aclDataType.
    """
    if not isinstance(x, np.ndarray):
        raise TypeError(_not_an_array(name, x))
    try:
        _dtypes.from_numpy(x.dtype)
    except TypeError:
        raise TypeError(f"{name} has dtype {x.dtype}, which has no aclDataType") from None
    return x


def _not_an_array(name: str, x: Any) -> str:
    """What to pass instead of ``x``: the message of the TypeError for host data that is no array."""
    kind = type(x).__name__
    if hasattr(x, "data_ptr") and hasattr(x, "stride"):
        return (
            f"{name} is a {kind} (a torch tensor?): pass pyaclnn.from_torch(tensor) for an NPU tensor, "
            "or tensor.numpy() for a CPU one"
        )
    if isinstance(x, (list, tuple)):
        return (
            f"{name} is a {kind}: pass a NumPy array (np.asarray(...) with the dtype you mean) "
            "or a DeviceArray"
        )
    return f"{name} must be a NumPy array or a pyaclnn.DeviceArray, got {kind}"


def to_device(
    x: npt.NDArray[_T] | DeviceArray[_T],
    *,
    backend: str | None = None,
    stream: Stream | None = None,
    device: int | None = None,
) -> DeviceArray[_T]:
    """Copy ``x`` to device memory: a block of the pool, ``aclrtMemcpyAsync`` on ``stream``.

    The copy is queued in order with the stream's work (by default the calling
    thread's current stream) and has completed when this returns: from
    pageable host memory ``aclrtMemcpyAsync`` returns only then (CANN's
    documented behaviour), so ``x`` may change afterwards.

    A non-contiguous NumPy view gives a contiguous array of its elements (its
    shape, not the storage it spans); only a broadcast view (a zero stride) is
    copied as the memory it has and described with its strides. A DeviceArray is
    returned as is when it already lives on ``backend``. The result has ``x``'s scalar
    type, to type checkers too: ``NDArray[np.float32]`` in, ``DeviceArray[np.float32]`` out.

    Parameters
    ----------
    x : ndarray or DeviceArray
        Data of a dtype ACL names (float32, float16, bfloat16, float64, int32, int64, ...).
        Lists and torch tensors are refused, as the operators refuse them
        (:func:`host_array`): ``np.asarray`` with the dtype you mean, or
        :func:`pyaclnn.from_torch`.
    backend : {"numpy", "npu"}, optional
        Where to put it; the active backend by default.
    stream : Stream, optional
        The stream the copy is queued on and the array is for; the calling thread's
        current stream of ``device`` by default.
    device : int, optional
        The device to copy to (by default the stream's, or the thread's current one).
    """
    if isinstance(x, DeviceArray):
        name = backend or _backends.active_name()
        if x.backend == name and (device is None or x.device == device):
            return x
        return to_device(x.numpy(), backend=name, stream=stream, device=device)
    x = host_array("x", x)
    if stream is None:
        ctx = _context.context(backend)
        stream = current(ctx, None if device is None else _context._device_id(device, ctx))
    if x.size == 0:  # the arrays check that device (if given) is the stream's
        return DeviceArray(x.shape, x.dtype, backend=stream.backend, stream=stream, device=device)
    if _captures.active:
        _captures.refuse(
            stream._state, stream.backend, stream.device, "to_device(x=NumPy array)", _captures.PAGEABLE
        )
    storage, strides, offset = _covering_storage(x)
    array = DeviceArray(
        x.shape,
        x.dtype,
        strides=strides,
        offset=offset,
        storage_size=storage.size,
        backend=stream.backend,
        stream=stream,
        device=device,
    )
    try:
        host = np.ascontiguousarray(storage).view(np.uint8)
        state = stream._state
        state.enqueue(
            acl.rt.memcpy_async, array.ptr, array.storage_nbytes, host, host.nbytes, _H2D, state.handle
        )
        array._written_after(stream)
    except BaseException:
        array.close()
        raise
    return array
