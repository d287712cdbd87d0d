#!/usr/bin/python3
"""Checks that a binary built with CPU dispatch runs on any x86-64-v2 CPU until it chooses a set.

Usage: tests/check_isa_leaks.py BINARY...   (the `tfm` command, the Python module's _tfm*.so)

Every function of BINARY (objdump -d, demangled) is read. An AVX instruction (a VEX or EVEX
mnemonic: v...) or a BMI one (andn, bextr, blsi, bzhi, pdep, pext, rorx, sarx, shlx, shrx) is
allowed only inside a kernel set compiled for it (kernels/cpu/isa.h: the namespaces
tfm::internal::cpu::avx2, ::avx512 and ::avx512_bf16), and a 512-bit register (zmm) or an
AVX-512 mask (k0-k7) only inside avx512 and avx512_bf16. A global or weak function outside them
with such an instruction would be code compiled for one set that the linker chose for everyone:
the same inline function or template instantiated in two sets' files, one copy kept. Local
functions (nm's t: a set's own clones of a template, `[clone .isra.0]`, `[clone .cold]`) are
called from their object file alone, so from their set's code, and are not counted. Prints each offending function with one offending instruction,
and exits 1; exits 0 with a summary line otherwise.
"""
import re
import subprocess
import sys

AVX_SETS = ("tfm::internal::cpu::avx2::", "tfm::internal::cpu::avx512::",
            "tfm::internal::cpu::avx512_bf16::")
AVX512_SETS = AVX_SETS[1:]
# VEX/EVEX mnemonics all start with v; these few legacy ones do too.
NOT_AVX = {"verr", "verw", "vmcall", "vmlaunch", "vmresume", "vmxoff", "vmxon", "vmread",
           "vmwrite", "vmptrld", "vmptrst", "vmclear", "vmfunc", "vmrun", "vmload", "vmsave",
           "vmmcall"}
BMI = {"andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "pdep", "pext", "rorx", "sarx", "shlx",
       "shrx"}
FUNCTION = re.compile(r"^([0-9a-f]+) <(.*)>:$")
INSTRUCTION = re.compile(r"^\s+[0-9a-f]+:\s+([a-z][a-z0-9.]*)\s*(.*)$")
AVX512_OPERAND = re.compile(r"%zmm|%k[0-7]\b")


def local_functions(binary):
    """The addresses of the local (nm: t) functions of binary."""
    symbols = subprocess.run(["nm", "--defined-only", binary], check=True, capture_output=True,
                             text=True).stdout
    return {int(fields[0], 16) for fields in (line.split() for line in symbols.splitlines())
            if len(fields) >= 3 and fields[1] == "t"}


def check(binary):
    disassembly = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", binary],
                                 check=True, capture_output=True, text=True).stdout
    local = local_functions(binary)
    offences = {}
    functions = 0
    in_sets = 0
    function = None
    for line in disassembly.splitlines():
        header = FUNCTION.match(line)
        if header:
            function = header.group(2)
            functions += 1
            in_sets += any(s in function for s in AVX_SETS)
            if int(header.group(1), 16) in local and not any(s in function for s in AVX_SETS):
                function = None  # a local function: its object file's alone
            continue
        instruction = INSTRUCTION.match(line)
        if not instruction or function is None or function in offences:
            continue
        mnemonic, operands = instruction.groups()
        avx = (mnemonic.startswith("v") and mnemonic not in NOT_AVX) or mnemonic in BMI
        if avx and not any(s in function for s in AVX_SETS):
            offences[function] = line.strip()
        elif AVX512_OPERAND.search(operands) and not any(s in function for s in AVX512_SETS):
            offences[function] = line.strip()
    return functions, in_sets, offences


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    failed = False
    for binary in sys.argv[1:]:
        functions, in_sets, offences = check(binary)
        if functions < 1000 or in_sets < 100:
            print(f"{binary}: {functions} functions, {in_sets} in the kernel sets: not a tfm binary "
                  "with CPU dispatch", file=sys.stderr)
            failed = True
            continue
        for function, line in sorted(offences.items()):
            print(f"{binary}: {function}: {line}", file=sys.stderr)
        failed |= bool(offences)
        print(f"{binary}: {functions} functions, {in_sets} in the AVX kernel sets, "
              f"{len(offences)} with instructions of a set outside it")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
