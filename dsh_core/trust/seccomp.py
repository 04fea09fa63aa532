"""The seccomp filter the sandbox hands to ``bwrap --seccomp``: no sockets that reach outside.

    program = socket_filter()        # bytes: classic BPF, struct sock_filter[] in native order
    program = socket_filter("aarch64")

Why (SPEC 10.6): a read-only mount does not stop ``connect()``, so a command could reach any
unix socket it can see (``/run/docker.sock``, an ssh or gpg agent, a ``screen`` session in
``/var/tmp``), and ``--unshare-net`` does not namespace path-named unix sockets, nor ``AF_VSOCK``
(the hypervisor's host). The filter lets ``socket()`` create only ``AF_INET``, ``AF_INET6`` (in
the sandbox's own network namespace: a loopback of its own without ``--allow network``) and
``AF_NETLINK`` (``getaddrinfo`` and ``ip`` ask the kernel for addresses through it); every other
family, ``AF_UNIX`` first, fails with ``EAFNOSUPPORT``, as on a kernel without it. A unix socket
needs a ``socket()`` of its own before its ``connect()``, so no ``connect()`` to one is possible.
``socketpair()`` is not filtered: it makes two connected sockets and reaches nobody, and asyncio,
multiprocessing and many build tools need it. ``io_uring`` fails with ``ENOSYS`` (a missing
feature, which its users fall back from): it can create sockets without ``socket()``.

The filter is written here, in classic BPF, rather than with libseccomp: it is a dozen
instructions, and it spares dsh a native dependency. Its derivation:

The kernel runs the program on a ``struct seccomp_data`` for each system call::

    offset 0   int  nr        the system call number, in the calling ABI's numbering
    offset 4   u32  arch      AUDIT_ARCH_*: which ABI the call came through
    offset 8   u64  instruction_pointer
    offset 16  u64  args[6]   args[0] at 16; its low 32 bits at 16 on a little-endian machine

1. The architecture comes first: the same number means different calls in different ABIs, and
   a 64-bit process may use the 32-bit ABI (``int 0x80`` on x86_64). An ABI the table does not
   know kills the process (``SECCOMP_RET_KILL_PROCESS``), so nothing passes unchecked.
2. x32 (x86_64's third ABI) arrives as ``AUDIT_ARCH_X86_64`` with bit 30 of ``nr`` set
   (``__X32_SYSCALL_BIT``): any ``nr`` at or above 0x40000000 kills the process.
3. ``socket(domain, ...)``: ``domain`` is an ``int``, and the kernel reads only the low 32 bits
   of ``args[0]``, so those are what the filter compares (high bits set cannot smuggle a
   family past it).
4. i386 also has ``socketcall(call, args*)``, which multiplexes every socket call behind a
   pointer the filter cannot read: ``call == SYS_SOCKET`` (1) is refused, so a 32-bit program
   gets no socket at all that way; ``SYS_SOCKETPAIR`` and the rest pass (without a socket of its
   own, nothing reaches out).
5. Everything else is allowed: the filter narrows, bwrap's namespaces do the rest.

Machines: x86_64 (with i386, refusing x32) and aarch64 (with 32-bit arm). Elsewhere
:func:`socket_filter` raises :class:`ValueError` and the sandbox runs without a filter.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import sys
from dataclasses import dataclass

__all__ = ["socket_filter"]

# <linux/filter.h>, <linux/bpf_common.h>: one instruction is {u16 code; u8 jt; u8 jf; u32 k}.
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = the 32-bit word at offset k of seccomp_data
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K: A == k ? jt : jf (jumps count instructions skipped)
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K: A >= k ? jt : jf
_RET_K = 0x06  # BPF_RET | BPF_K: the verdict is k

# <linux/seccomp.h>
_KILL_PROCESS = 0x80000000
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000  # | errno in the low 16 bits

# <linux/audit.h>
_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_I386 = 0x40000003
_AUDIT_ARCH_AARCH64 = 0xC00000B7
_AUDIT_ARCH_ARM = 0x40000028

_X32_SYSCALL_BIT = 0x40000000
_SYS_SOCKET = 1  # socketcall's first argument for socket() (<linux/net.h>)
_IO_URING = (425, 426, 427)  # io_uring_setup, _enter, _register: one number on every ABI

_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0 = 0, 4, 16

_ALLOWED_FAMILIES = (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)


@dataclass(frozen=True, slots=True)
class _Abi:
    """One system call ABI: the numbers the filter looks at."""

    arch: int
    socket: int
    socketcall: int | None = None
    refuse_above: int | None = None
    """Numbers from here up are another ABI in disguise (x32): kill."""


_ABIS = {
    "x86_64": (
        _Abi(_AUDIT_ARCH_X86_64, socket=41, refuse_above=_X32_SYSCALL_BIT),
        _Abi(_AUDIT_ARCH_I386, socket=359, socketcall=102),
    ),
    "aarch64": (
        _Abi(_AUDIT_ARCH_AARCH64, socket=198),
        _Abi(_AUDIT_ARCH_ARM, socket=281),
    ),
}
_ABIS["amd64"] = _ABIS["x86_64"]
_ABIS["arm64"] = _ABIS["aarch64"]


def socket_filter(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one), ready for ``bwrap --seccomp FD``.

    Raises ValueError for a machine it has no system call table for, or a big-endian one.
    """
    name = (machine or os.uname().machine).lower()
    if name not in _ABIS or sys.byteorder != "little":
        raise ValueError(f"no seccomp filter for this machine ({name}, {sys.byteorder}-endian)")
    program = _Program()
    abis = _ABIS[name]
    program.load(_OFFSET_ARCH)
    for index, abi in enumerate(abis):
        program.jump_if(_JEQ_K, abi.arch, f"abi{index}")
    program.ret(_KILL_PROCESS)
    for index, abi in enumerate(abis):
        program.label(f"abi{index}")
        program.load(_OFFSET_NR)
        if abi.refuse_above is not None:
            program.jump_if(_JGE_K, abi.refuse_above, "kill")
        program.jump_if(_JEQ_K, abi.socket, "family")
        if abi.socketcall is not None:
            program.jump_if(_JEQ_K, abi.socketcall, "socketcall")
        for number in _IO_URING:
            program.jump_if(_JEQ_K, number, "no-io-uring")
        program.ret(_ALLOW)
    program.label("family")
    program.load(_OFFSET_ARG0)
    for family in _ALLOWED_FAMILIES:
        program.jump_if(_JEQ_K, family, "allow")
    program.ret(_ERRNO | errno.EAFNOSUPPORT)
    if any(abi.socketcall is not None for abi in abis):
        program.label("socketcall")
        program.load(_OFFSET_ARG0)
        program.jump_if(_JEQ_K, _SYS_SOCKET, "no-socket")
        program.ret(_ALLOW)
        program.label("no-socket")
        program.ret(_ERRNO | errno.EAFNOSUPPORT)
    program.label("no-io-uring")
    program.ret(_ERRNO | errno.ENOSYS)
    program.label("allow")
    program.ret(_ALLOW)
    program.label("kill")
    program.ret(_KILL_PROCESS)
    return program.assemble()


class _Program:
    """A tiny assembler: instructions with named forward jump targets, resolved at the end."""

    def __init__(self) -> None:
        self._code: list[tuple[int, int, str | None]] = []
        """(code, k, target label of a conditional jump taken when true, else None)."""
        self._labels: dict[str, int] = {}

    def load(self, offset: int) -> None:
        self._code.append((_LD_W_ABS, offset, None))

    def jump_if(self, code: int, k: int, target: str) -> None:
        """Jump to ``target`` when the comparison holds; else go on with the next instruction."""
        self._code.append((code, k, target))

    def ret(self, verdict: int) -> None:
        self._code.append((_RET_K, verdict, None))

    def label(self, name: str) -> None:
        assert name not in self._labels, f"label {name} defined twice"
        self._labels[name] = len(self._code)

    def assemble(self) -> bytes:
        out = bytearray()
        for at, (code, k, target) in enumerate(self._code):
            jt = 0
            if target is not None:
                jt = self._labels[target] - at - 1
                assert 0 <= jt <= 0xFF, f"jump to {target} out of reach"
            out += struct.pack("=HBBI", code, jt, 0, k)
        return bytes(out)
