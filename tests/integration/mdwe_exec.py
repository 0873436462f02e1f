"""Runs a program under systemd's MemoryDenyWriteExecute=yes without
systemd: `mdwe_exec.py prctl|seccomp PROGRAM [ARG...]` sets the
restriction on itself, then execs PROGRAM, which keeps it, and so do the
processes it starts (test_worker_jit.py runs the hub this way).

- prctl: prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN), Linux 6.3 and
  later (what recent systemd uses where it can).
- seccomp: the filter systemd installs otherwise
  (seccomp_memory_deny_write_execute): mmap with PROT_WRITE and PROT_EXEC
  both, mprotect and pkey_mprotect with PROT_EXEC, shmat with SHM_EXEC
  fail with EPERM. x86_64 and aarch64.

Exit status 125 when the restriction cannot be set (the reason on stderr)."""
import ctypes
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_SET_MDWE = 38, 22, 65
PR_MDWE_REFUSE_EXEC_GAIN, SECCOMP_MODE_FILTER = 1, 2
PROT_WRITE, PROT_EXEC, SHM_EXEC, EPERM = 2, 4, 0o100000, 1
# audit arch, then the numbers of mmap, mprotect, pkey_mprotect, shmat
ARCHES = {"x86_64": (0xC000003E, 9, 10, 329, 30), "aarch64": (0xC00000B7, 222, 226, 288, 196)}
LD_W_ABS, JEQ_K, AND_K, RET_K = 0x20, 0x15, 0x54, 0x06
ALLOW, DENY = 0x7FFF0000, 0x00050000 | EPERM
ARG2 = 16 + 2 * 8  # seccomp_data.args[2], its low 32 bits (little-endian)

libc = ctypes.CDLL(None, use_errno=True)


def fail(what):
    sys.stderr.write("mdwe_exec: %s: %s\n" % (what, os.strerror(ctypes.get_errno())))
    sys.exit(125)


def seccomp_filter():
    """The filter's instructions (struct sock_filter, packed)."""
    arch = ARCHES.get(platform.machine())
    if not arch:
        sys.stderr.write("mdwe_exec: no seccomp filter for %s\n" % platform.machine())
        sys.exit(125)
    audit, mmap, mprotect, pkey_mprotect, shmat = arch

    def op(code, k, jt=0, jf=0):
        return struct.pack("HBBI", code, jt, jf, k)

    def check(mask):  # args[2] & mask == mask: EPERM, else allowed
        return [op(LD_W_ABS, ARG2), op(AND_K, mask), op(JEQ_K, mask, 0, 1), op(RET_K, DENY),
                op(RET_K, ALLOW)]
    # 0-2: another architecture's call is let through; 3: the number;
    # 4-7: to the check of each call (offsets in the checks below); 8: allow.
    program = [op(LD_W_ABS, 4), op(JEQ_K, audit, 1, 0), op(RET_K, ALLOW), op(LD_W_ABS, 0)]
    calls = [(mmap, 0), (mprotect, 5), (pkey_mprotect, 5), (shmat, 10)]
    checks_at = len(program) + len(calls) + 1
    for nr, offset in calls:
        program.append(op(JEQ_K, nr, checks_at + offset - len(program) - 1, 0))
    program.append(op(RET_K, ALLOW))
    return program + check(PROT_WRITE | PROT_EXEC) + check(PROT_EXEC) + check(SHM_EXEC)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("prctl", "seccomp"):
        sys.stderr.write("usage: mdwe_exec.py prctl|seccomp PROGRAM [ARG...]\n")
        sys.exit(2)
    if sys.argv[1] == "prctl":
        if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
            fail("prctl(PR_SET_MDWE)")
    else:
        code = b"".join(seccomp_filter())
        buf = ctypes.create_string_buffer(code, len(code))
        prog = struct.pack("HxxxxxxQ", len(code) // 8, ctypes.addressof(buf))
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(prog), 0, 0) != 0:
            fail("prctl(PR_SET_SECCOMP)")
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
