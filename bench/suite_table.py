#!/usr/bin/python3
"""bench/suite.sh's helper: its JSON lines, and the one table it prints from them.

  suite_table.py settings KEY=VALUE...             one "settings" line
  suite_table.py gemm GEMM_BENCH_JSON STDERR_FILE  gemm_bench --benchmark_format=json -> one line a product
  suite_table.py error PART FRAMEWORK PRECISION STDERR_FILE   one line for a failed run
  suite_table.py peaks PART PRECISION BEFORE_JSON AFTER_JSON  the peaks measured around a tfm row
  suite_table.py table RESULTS.jsonl [SECONDS]     the table (again, from a saved OUT file)

Standard library only: runs with /usr/bin/python3 or any python3.
"""

import json
import re
import sys
import textwrap
import time

# int8 (int8 linears, the rest f32) and int8-bf16 (the rest bf16) are decoding's only.
FRAMEWORK_COLUMNS = [("tfm", "f32"), ("tfm", "bf16"), ("tfm", "int8"), ("tfm", "int8-bf16"),
                     ("pytorch", "f32"), ("pytorch", "bf16")]
HEADER = ["part", "measure", "tfm f32", "tfm bf16", "tfm int8", "tfm int8-bf16", "PyTorch f32",
          "PyTorch bf16", "tfm/PyTorch f32", "tfm/PyTorch bf16", "tfm int8-bf16/bf16"]
GEMM_KINDS = ["linear_forward", "linear_weight_grad", "attention_scores", "attention_values",
              "attention_train"]
# The roles of the linear products in Transformer base: (K, N) of x [M, K] @ W^T [K, N].
LINEAR_ROLES = {(512, 512): "attention projections", (512, 2048): "FFN up",
                (2048, 512): "FFN down", (512, 37000): "vocabulary projection"}


def settings_line(pairs):
    row = {"suite": "settings", "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    for pair in pairs:
        key, _, value = pair.partition("=")
        row[key] = value
    return row


def gemm_lines(path, stderr_path):
    """One line per product of gemm_bench's JSON: kind, element type, dims, ms and GFLOP/s; or one
    error line when there is none."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {}
    rows = []
    for bench in report.get("benchmarks", []):
        if bench.get("run_type", "iteration") != "iteration" or "FLOP/s" not in bench:
            continue
        parts = bench["name"].split("/")
        kind = parts[0]
        dtype = next((d for d in ("bf16", "int8") if kind.endswith("_" + d)), "f32")
        kind = kind.removesuffix("_" + dtype)
        dims = {m.group(1): int(m.group(2)) for m in (re.fullmatch(r"(\w+):(\d+)", p) for p in parts) if m}
        time_unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[bench.get("time_unit", "ns")]
        rows.append({"suite": "gemm", "name": bench["name"], "kind": kind, "dtype": dtype, **dims,
                     "ms": bench["real_time"] * time_unit, "gflops": bench["FLOP/s"] / 1e9})
    return rows or [error_line("gemm", "tfm", "f32,bf16", stderr_path)]


def error_line(part, framework, precision, stderr_path):
    with open(stderr_path, encoding="utf-8", errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    return {"suite": part, "framework": framework, "precision": precision,
            "error": lines[-1] if lines else "failed without a message"}


def product_label(row):
    kind = row["kind"]
    if kind in ("linear_forward", "linear_weight_grad"):
        m, k, n = row["M"], row["K"], row["N"]
        role = LINEAR_ROLES.get((k, n))
        what = "x W^T" if kind == "linear_forward" else "dW += g^T x"
        return f"{what}: {m} rows, {k} -> {n}" + (f" ({role})" if role else "")
    if kind == "attention_scores":
        return "q k^T: 128x8 heads, 32x64 @ 64x32"
    if kind == "attention_values":
        return "P v: 128x8 heads, 32x32 @ 32x64"
    if kind == "training_product":
        layout = ("x W^T + bias", "g W", "c += g^T x")[row["layout"]]
        # bf16 operands: 1 is our vdpbf16ps kernel, 2 ours that widens them to f32 for the FMA.
        kernel = ("oneDNN", "our blocked kernel", "our blocked kernel, bf16 widened")[row["kernel"]]
        return f"{row['M']} x {row['K']} x {row['N']}, {layout}: {kernel}"
    if kind == "attention_train":
        # flushMB > 0: that much other memory written between iterations, the inputs read from memory.
        cold = f", inputs from memory ({row['flushMB']} MB written between)" if row.get("flushMB") else ""
        return (f"attention, forward + backward (our tile kernels): {row['B']}x{row['heads']} heads, "
                f"{row['T']} tokens, head width {row['d']}{cold}")
    if kind == "decoder_step":
        # 8 products a layer of base's decoder, 14.7 MB of f32 weights: 1 layer stays in the caches,
        # 12 (176 MB) stream from memory as a decoding step's weights do.
        kernel = ("oneDNN", "our panel kernel")[row["kernel"]]
        where = "in the caches" if row["layers"] == 1 else "streamed from memory"
        layers = "1 layer's" if row["layers"] == 1 else f"{row['layers']} layers'"
        return (f"decoding step's products: {row['M']} rows, {layers} weights "
                f"({row['layers'] * 14.7:.0f} MB, {where}): {kernel}")
    if kind == "attention_cached":
        # A beam-4 decoding step of base: 128 hypotheses over 25 cached positions, 8 heads of 64;
        # f32 keys and values: 13.1 MB a layer for the self-attention, 3.3 MB for the cross-attention.
        cross = row["cross"] == 1
        what = "cross-attention, 32 sources x 4 hypotheses" if cross else "self-attention, 128 hypotheses"
        layers = "1 layer's" if row["layers"] == 1 else f"{row['layers']} layers'"
        return (f"attention over key/value caches (our row kernel): {what}, 25 positions, {layers} caches "
                f"({row['layers'] * (3.3 if cross else 13.1):.0f} MB)")
    return row["name"]


class Table:
    """Rows of cells under HEADER, with numbered footnotes for the runs that failed."""

    def __init__(self):
        self.rows = []
        self.errors = {}  # (framework, precision, error) -> [where], in footnote order

    def error_mark(self, framework, precision, error, where):
        places = self.errors.setdefault((framework, precision, error), [])
        if where not in places:
            places.append(where)
        return f"n/a [{list(self.errors).index((framework, precision, error)) + 1}]"

    def add(self, part, measure, cells=None, ratios=("", "", "")):
        cells = cells or {}
        ratios = list(ratios) + [""] * (3 - len(ratios))
        self.rows.append([part, measure] + [cells.get(c, "") for c in FRAMEWORK_COLUMNS] + ratios)

    def render(self):
        rows = [HEADER] + self.rows
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
        right = [False, False] + [True] * (len(HEADER) - 2)

        def line(r):
            return "| " + " | ".join(c.rjust(w) if ra else c.ljust(w)
                                     for c, w, ra in zip(r, widths, right)) + " |"

        rule = "|" + "|".join(("-" * (w + 1) + ":") if ra else "-" * (w + 2)
                              for w, ra in zip(widths, right)) + "|"
        return "\n".join([line(HEADER), rule] + [line(r) for r in self.rows])

    def footnotes(self):
        return [f"[{i}] {framework} {precision} ({', '.join(where)}): {error}"
                for i, ((framework, precision, error), where) in enumerate(self.errors.items(), 1)]


def seconds_text(s):
    return f"{s:.3f}" if s < 1 else f"{s:.2f}"


def ratio_text(numerator, denominator):
    if numerator is None or denominator is None or not denominator:
        return ""
    return f"{numerator / denominator:.2f}x"


def plural(count, word):
    return f"{count} {word}" + ("" if count == 1 else "s")


def gemm_ceiling(rows):
    """Per element type, the best GFLOP/s of the large (linear, 4096-row) products."""
    large = [r for r in rows if r["kind"].startswith("linear")]
    return {d: max((r["gflops"] for r in large if r["dtype"] == d), default=None) for d in ("f32", "bf16")}


def gemm_peak(rows):
    """Per element type, the rate of the multiply-add instructions alone (gemm_bench's peak_*)."""
    return {r["dtype"]: r["gflops"] for r in rows if r["kind"].startswith("peak")}


def gemm_rows(table, rows, ceiling, peak):
    if not rows:
        return
    if peak:
        table.add("gemm", "peak: GFLOP/s of the multiply-add instructions alone",
                  {("tfm", d): f"{c:.0f}" for d, c in peak.items()})
    table.add("gemm", "ceiling: best GFLOP/s of the large products",
              {("tfm", d): f"{c:.0f}" for d, c in ceiling.items() if c is not None})
    rows = [r for r in rows if not r["kind"].startswith("peak")]
    products = {}
    for r in rows:
        key = (r["kind"], r.get("M"), r.get("K"), r.get("N"), r.get("layout"), r.get("kernel"),
               r.get("layers"), r.get("B"), r.get("T"), r.get("heads"), r.get("d"), r.get("cross"))
        products.setdefault(key, {})[r["dtype"]] = r
    order = sorted(products, key=lambda k: GEMM_KINDS.index(k[0]) if k[0] in GEMM_KINDS else len(GEMM_KINDS))
    for key in order:
        by_dtype = products[key]
        cells = {}
        for dtype, r in by_dtype.items():
            fraction = f" ({r['gflops'] / ceiling[dtype]:.0%})" if ceiling.get(dtype) else ""
            cells[("tfm", dtype)] = f"{r['gflops']:.0f}{fraction}"
        table.add("gemm", product_label(next(iter(by_dtype.values()))), cells)


def peak_rates(path):
    """Per element type, gemm_bench's best peak_* rate in a --benchmark_format=json file ({} when
    it has none: no file, or a build without AVX-512)."""
    try:
        with open(path, encoding="utf-8") as f:
            return peak_rates_of(json.load(f))
    except (OSError, ValueError):
        return {}


def peak_rates_of(report):
    """peak_rates of gemm_bench's JSON report, read."""
    rates = {}
    for bench in report.get("benchmarks", []):
        if bench.get("run_type", "iteration") != "iteration" or "FLOP/s" not in bench:
            continue
        dtype = {"peak_fma": "f32", "peak_dot_bf16": "bf16"}.get(bench["name"].split("/")[0])
        if dtype:
            rates[dtype] = max(rates.get(dtype, 0.0), bench["FLOP/s"] / 1e9)
    return rates


def peaks_line(part, precision, before_path, after_path):
    return {"suite": "peaks_around", "part": part, "framework": "tfm", "precision": precision,
            "before": peak_rates(before_path), "after": peak_rates(after_path)}


# Peaks before and after a row further apart than this: the machine's speed moved during the row.
UNSTEADY_PEAKS = 0.05


def of_peak_around(rate, around, dtype):
    """The products' rate against the mean of the peaks measured just before and after the row:
    "91% (402 / 396)", with "unsteady" when the two differ by more than UNSTEADY_PEAKS."""
    before, after = (around or {}).get("before", {}).get(dtype), (around or {}).get("after", {}).get(dtype)
    if not before or not after:
        return None
    text = f"{rate / ((before + after) / 2):.0%} ({before:.0f} / {after:.0f})"
    return text + (" unsteady" if abs(before - after) > UNSTEADY_PEAKS * max(before, after) else "")


def describe_model(row):
    model = row.get("model") or {}
    if not model:
        return f"vocab {row.get('vocab')}"
    dk = model["d_k"] if model["d_k"] == model["d_v"] else f"{model['d_k']}/{model['d_v']}"
    return (f"layers {model['layers']}, d_model {model['d_model']}, d_ff {model['d_ff']}, heads "
            f"{model['heads']}, d_k=d_v {dk}, dropout {model['dropout']}, vocab {model['vocab_size']}")


def outside_products(row):
    return f"{row['outside_gemm_fraction']:.0%}" if "outside_gemm_fraction" in row else None


def cells_of(rows, errors, fmt, frameworks=("tfm", "pytorch")):
    """A row's cells: fmt(result) for each (framework, precision) result, and the error marks."""
    out = dict(errors)
    for key, r in rows.items():
        if key[0] in frameworks:
            value = fmt(r)
            if value is not None:
                out[key] = value
    return out


def train_rows(table, part, results, settings, ceiling, peak, descriptions, around=None):
    if not results:
        return
    tfm = next((r for (f, _), r in results.items() if f == "tfm" and "error" not in r), None)
    recipe = tfm.get("recipe") if tfm else settings.get("recipe") if part == "train_recipe" else ""
    name = "train " + (re.sub(r"\.ya?ml$", "", recipe.rsplit("/", 1)[-1]) if recipe else "base")
    if tfm:
        source = f"the model section of {recipe}" if recipe else "preset base"
        descriptions.append(
            f"{name}: {source} ({describe_model(tfm)}); {tfm['batch']} pairs of {tfm['src_len']} + "
            f"{tfm['tgt_len']} tokens, no padding; {plural(tfm['steps'], 'timed step')} after "
            f"{settings.get('train_warmup', '?')} warm-up.")
    errors = {k: table.error_mark(r["framework"], r["precision"], r["error"], name)
              for k, r in results.items() if "error" in r}
    ok = {k: r for k, r in results.items() if "error" not in r}

    def cells(fmt, frameworks=("tfm", "pytorch")):
        return cells_of(ok, errors, fmt, frameworks)

    def tokens(framework, precision):
        r = ok.get((framework, precision))
        return r["tokens_per_second"] if r else None

    def in_products(r):
        if "gemm_seconds_per_step" not in r:
            return None
        rate = r["gemm_gflops_per_second"]
        best = ceiling.get(r.get("precision", "f32"))
        limit = peak.get(r.get("precision", "f32"))
        return (f"{seconds_text(r['gemm_seconds_per_step'])} ({rate:.0f}"
                + (f", {rate / best:.0%}" if best else "")
                + (f", {rate / limit:.0%} of peak" if limit else "") + ")")

    ratios = tuple(ratio_text(tokens("tfm", p), tokens("pytorch", p)) for p in ("f32", "bf16"))
    table.add(name, "tokens/s (source + target)", cells(lambda r: f"{r['tokens_per_second']:.0f}"), ratios)
    table.add(name, "s/step", cells(lambda r: seconds_text(r["seconds_per_step"])))
    table.add(name, "forward + backward + Adam s", cells(
        lambda r: f"{r['forward_s']:.2f} + {r['backward_s']:.2f} + {r['update_s']:.2f}"
        if "forward_s" in r else None, ("tfm",)))
    table.add(name, "in products s/step (GFLOP/s, of ceiling, of peak)", cells(in_products, ("tfm",)))
    around = around or {}
    if around:  # (older OUT files have no peaks_around lines)
        table.add(name, "in products, of the peak around the row (peak before / after)", cells(
            lambda r: of_peak_around(r["gemm_gflops_per_second"], around.get(r.get("precision", "f32")),
                                     r.get("precision", "f32"))
            if "gemm_gflops_per_second" in r else None, ("tfm",)))
    table.add(name, "outside products", cells(outside_products, ("tfm",)))
    table.add(name, "peak RSS MB", cells(lambda r: f"{r['peak_rss_mb']:.0f}"))


def decode_rows(table, results, settings, descriptions):
    if not results:
        return
    # bench_decode names a bf16 run's mode "beam4-bf16": the search is the part before the dash.
    for r in results:
        if "mode" in r:
            r["mode"] = r["mode"].split("-")[0]
    modes = []
    for r in results:
        if "error" not in r and r["mode"] not in modes:
            modes.append(r["mode"])
    first = next((r for r in results if r["framework"] == "tfm" and "error" not in r), None)
    if first:
        descriptions.append(
            f"decode base: random weights, vocab {first['vocab']}, {first['batch']} sentences of "
            f"{first['src_len']} tokens, exactly {first['out_len']} output tokens each (eos suppressed), "
            f"encoder included; {plural(first['runs'], 'timed run')} after "
            f"{plural(int(first.get('warmup', settings.get('decode_warmup', 0))), 'warm-up run')}; "
            "PyTorch decodes the same weights and sources incrementally (bench/decode_pytorch.py).")
    errors = {(r["framework"], r["precision"]): table.error_mark(r["framework"], r["precision"], r["error"],
                                                                  "decode base")
              for r in results if "error" in r}
    for mode in modes:
        rows = {(r["framework"], r.get("precision", "f32")): r for r in results
                if "error" not in r and r["mode"] == mode}
        name = f"decode base {mode.replace('beam', 'beam ')}"

        def cells(fmt, frameworks=("tfm", "pytorch"), rows=rows):
            return cells_of(rows, errors, fmt, frameworks)

        def ratios(speed_of, rows=rows):
            """The table's three ratio columns of speed_of(row) (None: no figure)."""
            def speed(framework, precision):
                r = rows.get((framework, precision))
                return speed_of(r) if r else None
            return (ratio_text(speed("tfm", "f32"), speed("pytorch", "f32")),
                    ratio_text(speed("tfm", "bf16"), speed("pytorch", "f32")),
                    ratio_text(speed("tfm", "int8-bf16"), speed("tfm", "bf16")))

        table.add(name, "target tokens/s", cells(lambda r: f"{r['target_tokens_per_second']:.0f}"),
                  ratios(lambda r: r["target_tokens_per_second"]))
        table.add(name, "s per batch", cells(lambda r: seconds_text(r["seconds"])))
        # Each engine at its best: the inverse of its fastest timed run (the ratios above are of the
        # runs' means; PyTorch's runs spread more than tfm's).
        table.add(name, "s per batch, best run",
                  cells(lambda r: seconds_text(r["best_seconds"]) if r.get("best_seconds") else None),
                  ratios(lambda r: 1.0 / r["best_seconds"] if r.get("best_seconds") else None))
        table.add(name, "outside products", cells(outside_products, ("tfm",)))
        table.add(name, "peak RSS MB", cells(lambda r: f"{r['peak_rss_mb']:.0f}"))
        torch_row = rows.get(("pytorch", "f32"))
        if torch_row and isinstance(torch_row.get("identical_to_tfm"), dict):
            # decode_pytorch.py counts, per tfm output file, the sentences it decoded identically.
            def identical(r, mode=mode, same=torch_row["identical_to_tfm"]):
                precision = r.get("precision", "f32")
                key = mode + ("" if precision == "f32" else "-" + precision)
                return f"{same[key]}/{r['batch']}" if key in same else None
            table.add(name, "outputs identical to PyTorch f32's", cells(identical, ("tfm",)))


def print_table(path, seconds=None):
    settings, gemm, decode = {}, [], []
    train = {"train_base": {}, "train_recipe": {}}
    around = {"train_base": {}, "train_recipe": {}}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip().startswith("{"):
                continue
            r = json.loads(line)
            part = r.get("suite")
            if part == "settings":
                settings = r
            elif part == "gemm":
                gemm.append(r)  # an "error" line when gemm_bench failed as a whole
            elif part == "peaks_around" and r.get("part") in around:
                around[r["part"]][r["precision"]] = r
            elif part in train:
                train[part][(r["framework"], r.get("precision", r.get("mode")))] = r
            elif part == "decode_base":
                decode.append(r)
    table = Table()
    descriptions = []
    gemm_ok = [r for r in gemm if "error" not in r]
    ceiling = gemm_ceiling(gemm_ok)
    peak = gemm_peak(gemm_ok)
    if gemm_ok:
        descriptions.append(
            "gemm: gemm_bench (2 threads, fixed in it); cells are GFLOP/s (fraction of the ceiling); the "
            "ceiling is the best rate this run measured for that element type on the large products (the "
            "linear ones, 4096 rows); bf16 = bf16 operands with an f32 result. The peak is the rate of "
            "independent AVX-512 multiply-adds alone (FMA for f32, vdpbf16ps for bf16, vpdpbusd for "
            "int8): the vector units' limit. A CPU with AMX multiplies bf16 and int8 in its tile unit and "
            "can pass it.")
    for r in gemm:
        if "error" in r:
            mark = table.error_mark("gemm_bench", "f32,bf16", r["error"], "gemm")
            table.add("gemm", "gemm_bench", {("tfm", "f32"): mark})
    gemm_rows(table, gemm_ok, ceiling, peak)
    train_rows(table, "train_base", train["train_base"], settings, ceiling, peak, descriptions,
               around["train_base"])
    train_rows(table, "train_recipe", train["train_recipe"], settings, ceiling, peak, descriptions,
               around["train_recipe"])
    decode_rows(table, decode, settings, descriptions)

    details = [settings.get("date"), f"commit {settings.get('commit', '-')}",
               f"{settings.get('threads', '?')} threads",
               f"PyTorch's OpenBLAS core {settings.get('openblas_core', '?')}"]
    if seconds is not None:
        details.append(f"{seconds} s in all")
    print()
    print("tfm benchmark suite: " + ", ".join(d for d in details if d))
    for text in descriptions:
        print(textwrap.fill(text, 110, initial_indent="  ", subsequent_indent="    "))
    print()
    print(table.render())
    print()
    legend = ["tfm/PyTorch: tfm's tokens/s divided by PyTorch's in the same precision (above 1: tfm is "
              "faster), of the timed runs' means; on a decoding row \"s per batch, best run\" the same of "
              "each one's fastest run. Decoding has no PyTorch bf16 run, so there tfm bf16 is divided by PyTorch f32. "
              "tfm int8-bf16/bf16: decoding with int8 linears (the rest bf16) against all-bf16 products.",
              "in products: seconds per step inside cpu::gemm (oneDNN matmul, our blocked kernel), their GFLOP/s and that as a "
              "fraction of the GEMM ceiling and of the peak of the same precision; outside products: 1 - in "
              "products / step.",
              "of the peak around the row: the products' GFLOP/s against the mean of the peak of the same "
              "precision measured just before and just after the row (both given); \"unsteady\" when "
              f"they differ by more than {UNSTEADY_PEAKS:.0%}: the machine's speed moved during the row."]
    for text in legend + table.footnotes():
        print(textwrap.fill(text, 110, subsequent_indent="    "))
    print(f"raw JSON lines: {path}")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    command, args = argv[1], argv[2:]
    if command == "settings":
        print(json.dumps(settings_line(args)))
    elif command == "gemm" and len(args) == 2:
        for row in gemm_lines(*args):
            print(json.dumps(row))
    elif command == "error" and len(args) == 4:
        print(json.dumps(error_line(*args)))
    elif command == "peaks" and len(args) == 4:
        print(json.dumps(peaks_line(*args)))
    elif command == "table" and len(args) in (1, 2):
        print_table(args[0], int(args[1]) if len(args) == 2 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
