#!/usr/bin/env python3
"""Compare the machine code of one CPU kernel set in two builds, function by function.

    bench/compare_kernel_code.py BINARY_A BINARY_B [SYMBOL_REGEX]

Disassembles both binaries (objdump), keeps the functions whose mangled name matches SYMBOL_REGEX
(default: the avx512_bf16 kernel set, `cpu11avx512_bf16`), and compares each function's instructions
with addresses, offsets and symbol names masked, so that code placed elsewhere compares equal. Prints
each function that differs (with both instruction counts) and a last line of counts. Used to show
that the dispatched release build and the native build run the same kernel code (docs/BENCHMARKS.md,
"CPU dispatch"): a speed difference between them is then not the kernels' code.
"""
import re
import subprocess
import sys

FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def masked(instruction):
    """An instruction with its numbers and symbol names masked: only the operation and registers."""
    instruction = re.sub(r"#.*$", "", instruction)  # objdump's comment: the address an operand means
    instruction = re.sub(r"<[^>]*>", "", instruction)
    instruction = re.sub(r"-?0x[0-9a-f]+", "X", instruction)
    # A jump's or a call's target: a bare hexadecimal address as the whole operand (matching the
    # operand alone leaves a mnemonic such as x87's `fadd` as it is).
    return re.sub(r"^(\S+\s+)[0-9a-f]+$", r"\1A", instruction.strip())


def functions(binary, pattern):
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True,
                             text=True, check=True).stdout
    found, name, body = {}, None, []
    for line in listing.splitlines() + ["0 <end>:"]:
        start = FUNCTION.match(line)
        if start:
            if name and pattern.search(name):
                found[name] = body
            name, body = start.group(1), []
        elif "\t" in line:
            body.append(masked(line.split("\t", 1)[1]))
    return found


def demangled(name):
    return subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    pattern = re.compile(sys.argv[3] if len(sys.argv) > 3 else "cpu11avx512_bf16")
    a, b = functions(sys.argv[1], pattern), functions(sys.argv[2], pattern)
    same = 0
    for name in sorted(set(a) & set(b)):
        if a[name] == b[name]:
            same += 1
        else:
            print(f"differs: {len(a[name])} / {len(b[name])} instructions: {demangled(name)[:160]}")
    print(f"functions: {same} the same, {len(set(a) & set(b)) - same} differ, "
          f"{len(set(a) - set(b))} only in {sys.argv[1]}, {len(set(b) - set(a))} only in {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
