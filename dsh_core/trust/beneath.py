"""Opening a directory beneath another without following any symlink (SPEC 10.11).

    fd, created = open_directory("/work/project", "src/pkg", create=True)
    # fd: a descriptor on /work/project/src/pkg; created: ["src", "src/pkg"] if both were made

    held: list[HeldDirectory] = []
    top = HeldDirectory.beneath("/", "work/project", held)   # a walk's start
    sub = top.child("src", held)                              # None: a symlink there now
    os.scandir(sub.listed("/work/project/src"))               # what was opened, not a swap

``write`` and ``edit`` check a path with its symlinks followed (a symlink is judged by where it
leads), then write to where it led: the directory is opened by its resolved path from the
working directory (``/`` for a path a person allowed outside), and a symlink met on the way is
one swapped in after the check, so the open fails instead of following it. The temporary file
and the rename then happen inside that opened directory, which no later swap can move.

Linux 5.6 and later do this in one call: ``openat2`` with ``RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS`` (through ctypes: Python has no binding). Where the kernel lacks it or a
seccomp filter refuses it, each component is opened with ``O_NOFOLLOW`` from the one before.
Either way a symlink gives ``ELOOP`` (``EXDEV`` for one that leaves ``base``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat

from ..fileio import fsync_descriptor

__all__ = ["HeldDirectory", "open_directory"]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08

_OPENAT2 = 437
"""openat2's number where the system call tables are shared (it came after they were made
one); other machines (alpha, mips, ia64) number it otherwise and use the fallback."""
_SHARED_NUMBERS = {"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "armv7l", "i686"}


class _OpenHow(ctypes.Structure):
    """``struct open_how`` of <linux/openat2.h>."""

    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


class _Openat2:
    """The system call, until it is found missing (then never tried again)."""

    def __init__(self) -> None:
        self.available = platform.system() == "Linux" and platform.machine() in _SHARED_NUMBERS
        self._syscall: ctypes._NamedFuncPointer | None = None

    def __call__(self, base_fd: int, relative: str) -> int | None:
        """A descriptor on ``relative`` below ``base_fd``; None when openat2 cannot be used."""
        if not self.available:
            return None
        if self._syscall is None:
            syscall = ctypes.CDLL(None, use_errno=True).syscall
            syscall.restype = ctypes.c_long
            syscall.argtypes = (
                ctypes.c_long,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.POINTER(_OpenHow),
                ctypes.c_size_t,
            )
            self._syscall = syscall
        how = _OpenHow(_DIRECTORY, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)
        path = os.fsencode(relative)
        fd = int(self._syscall(_OPENAT2, base_fd, path, ctypes.byref(how), ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        number = ctypes.get_errno()
        if number in (errno.ENOSYS, errno.EPERM, errno.EINVAL):  # old kernel, or seccomp
            self.available = False
            return None
        raise OSError(number, os.strerror(number), relative)


_openat2 = _Openat2()


def open_directory(base: str, relative: str, *, create: bool = False) -> tuple[int, list[str]]:
    """A descriptor on the directory ``base/relative``, reached without following a symlink
    and without leaving ``base``; and the directories created on the way (``create``), as
    paths relative to ``base``, top first.

    ``relative`` is a resolved path below ``base`` ("" for ``base`` itself; no ``..``).
    OSError ``ELOOP`` or ``EXDEV`` when a symlink is on the way; the caller closes the fd.
    """
    base_fd = os.open(base, _DIRECTORY)
    try:
        if not relative:
            return os.dup(base_fd), []
        try:
            fd = _openat2(base_fd, relative)
        except FileNotFoundError:
            if not create:
                raise
            fd = None  # what is missing is made one component at a time
        if fd is not None:
            return fd, []
        return _walk_down(base_fd, relative, create=create)
    finally:
        os.close(base_fd)


def _walk_down(base_fd: int, relative: str, *, create: bool) -> tuple[int, list[str]]:
    """One component at a time with ``O_NOFOLLOW``, creating what is missing if asked."""
    created: list[str] = []
    fd = os.dup(base_fd)
    try:
        done: list[str] = []
        for part in relative.split("/"):
            done.append(part)
            try:
                below = _open_below(fd, part)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, dir_fd=fd)  # 0o777 less the umask, as mkdir(1)
                fsync_descriptor(fd)  # the new name is durable before anything goes in it
                created.append("/".join(done))
                below = _open_below(fd, part)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd, created


def _open_below(fd: int, name: str) -> int:
    """The directory ``name`` in ``fd``, not through a symlink: ``ELOOP`` for one, whatever it
    leads to (``O_DIRECTORY`` alone would say ``ENOTDIR``, as for a file)."""
    try:
        return os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


class HeldDirectory:
    """A directory held open while a walk uses it (``glob`` and ``grep``), and how many still
    need it: itself while its entries are in use, each subdirectory until it is opened from it.
    Each is in ``held``, to be closed however the walk ends."""

    def __init__(self, fd: int, held: list[HeldDirectory]) -> None:
        self.fd = fd
        self.users = 1
        held.append(self)

    @classmethod
    def beneath(cls, base: str, relative: str, held: list[HeldDirectory]) -> HeldDirectory:
        """``base/relative``, opened without following any symlink (:func:`open_directory`);
        OSError when a symlink is on the way."""
        fd, _ = open_directory(base, relative)
        return cls(fd, held)

    def child(self, name: str, held: list[HeldDirectory]) -> HeldDirectory | None:
        """The directory ``name`` in this one, not through a symlink; None if it is not one."""
        try:
            fd = os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=self.fd)
        except OSError:
            return None
        return HeldDirectory(fd, held)

    def listed(self, directory: str) -> str:
        """The path that reaches this very directory (``/proc/self/fd/N``): opening what is in
        it by that path cannot be led elsewhere by a rename. Without ``/proc``, ``directory``."""
        return f"/proc/self/fd/{self.fd}" if _PROC_FD else directory

    def hold(self, more: int) -> None:
        self.users += more

    def release(self) -> None:
        self.users -= 1
        if self.users <= 0:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


_PROC_FD = os.path.isdir("/proc/self/fd")
"""Whether a held directory can be named by its descriptor (not in a chroot without /proc)."""
