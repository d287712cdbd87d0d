#!/usr/bin/python3
"""The training curve of a `tfm train` run as a Markdown table and an SVG plot (standard library only).

  tools/plot_training.py RUN [--table FILE] [--svg FILE] [--title TEXT] [--loss-max Y]
  tools/plot_training.py --compare RUN_A[=LABEL] RUN_B[=LABEL] [...] [--table FILE] [--svg FILE] [--title TEXT]
                         [--loss-max Y]

RUN is a run directory (its metrics.jsonl is read) or a metrics.jsonl file. `tfm train` appends one JSON
object per line: {"type": "train", "step", "epoch", "loss", "perplexity", "lr", "grad_norm",
"tokens_per_second", "elapsed_s"} every log_every steps and {"type": "valid", "step", "epoch", "loss", "nll",
"perplexity", "elapsed_s", "bleu" (when validation BLEU is on)} at each validation; a parser's validations
have "f1" (greedy bracketing F1) instead, shown in place of BLEU. With training.ema_decay they also have
"ema_loss" and "ema_bleu" (or "ema_f1"), the moving average's, drawn in green beside the weights' and
given their own columns.

The table (stdout, or --table FILE) has one row per validation: epoch, step, elapsed minutes, validation loss
and perplexity, BLEU; the best loss and the best BLEU are in bold. The plot (--svg FILE) shows validation loss,
and training loss in a lighter colour, against elapsed minutes; when the validations have BLEU, a second panel
below shows it on the same time axis.

--compare puts several runs of one recipe (say f32 and bf16 mixed precision) on one plot, loss against the
update step and BLEU against elapsed time, with a table per run and a table of the validation loss differences;
see tools/plot_training_compare.py.

A resumed run appends to the same file; when a resumed run starts from an earlier checkpoint than the last
record, the records it repeats (step >= the first repeated step) are replaced by the new ones. A truncated
last line (a run killed mid-write) is skipped with a warning.
"""

import argparse
import html
import json
import math
import os
import sys

TRAIN_COLOUR = "#9ecae1"  # light blue: the training loss, noisy and secondary
VALID_COLOUR = "#08519c"  # dark blue: the validation loss
BLEU_COLOUR = "#d94801"  # orange
EMA_COLOUR = "#41ab5d"  # green: the moving average of the weights (training.ema_decay)
SCORE_NAME = "BLEU"  # "F1" for a parser's runs (read_metrics)
GRID_COLOUR = "#e5e5e5"
TEXT_COLOUR = "#222222"
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def read_metrics(path):
    """(train records, valid records), each in step order with records superseded by a resume removed."""
    series = {"train": [], "valid": []}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                print(f"plot_training.py: {path}:{number}: not JSON, skipped", file=sys.stderr)
                continue
            if "f1" in record and "bleu" not in record:  # a parser: its F1 takes BLEU's place
                global SCORE_NAME
                SCORE_NAME = "F1"
                record["bleu"] = record["f1"]
                if "ema_f1" in record:
                    record["ema_bleu"] = record["ema_f1"]
            records = series.get(record.get("type"))
            if records is None or "step" not in record or "elapsed_s" not in record:
                continue
            # A resume from an earlier checkpoint repeats steps: the later records replace them.
            while records and records[-1]["step"] >= record["step"]:
                records.pop()
            records.append(record)
    return series["train"], series["valid"]


def markdown_table(valid):
    if not valid:
        return "No validation records yet.\n"
    has_bleu = any("bleu" in r for r in valid)
    best_loss = min(r["loss"] for r in valid)
    best_bleu = max((r["bleu"] for r in valid if "bleu" in r), default=None)

    def bold_if(text, condition):
        return f"**{text}**" if condition else text

    has_ema_loss = any("ema_loss" in r for r in valid)
    has_ema_bleu = any("ema_bleu" in r for r in valid)
    header = (["epoch", "step", "elapsed (min)", "valid loss", "valid ppl"] + ([SCORE_NAME] if has_bleu else []) +
              (["EMA loss"] if has_ema_loss else []) + ([f"EMA {SCORE_NAME}"] if has_ema_bleu else []))
    align = ["---:"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for r in valid:
        cells = [str(r.get("epoch", "")), str(r["step"]), f"{r['elapsed_s'] / 60:.1f}",
                 bold_if(f"{r['loss']:.4f}", r["loss"] == best_loss), f"{r['perplexity']:.2f}"]
        if has_bleu:
            cells.append(bold_if(f"{r['bleu']:.2f}", r["bleu"] == best_bleu) if "bleu" in r else "-")
        if has_ema_loss:
            cells.append(f"{r['ema_loss']:.4f}" if "ema_loss" in r else "-")
        if has_ema_bleu:
            cells.append(f"{r['ema_bleu']:.2f}" if "ema_bleu" in r else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def nice_ticks(low, high, count=6):
    """Round tick values covering [low, high]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if not math.isfinite(low) or not math.isfinite(high):
        low, high = 0.0, 1.0
    if high - low < 1e-12:
        pad = abs(high) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    ticks = []
    value = first
    while value <= last + step * 1e-6:
        ticks.append(round(value, 10))
        value += step
    return ticks


def tick_label(value, ticks):
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if decimals == 0 and abs(step - round(step)) > 1e-9:
        decimals = 1  # steps of 2.5
    return f"{value:.{decimals}f}"


def stroke_style(dash=None, opacity=None):
    return (f" stroke-dasharray='{dash}'" if dash else "") + (f" stroke-opacity='{opacity}'" if opacity else "")


def marker_svg(shape, x, y, colour):
    """A data point marker centred on pixel (x, y); shape True means a circle."""
    if shape == "square":
        return f"<rect x='{x - 3.5:.1f}' y='{y - 3.5:.1f}' width='7' height='7' fill='{colour}'/>"
    if shape == "triangle":
        return f"<polygon points='{x:.1f},{y - 4.5:.1f} {x + 4.5:.1f},{y + 3.5:.1f} {x - 4.5:.1f},{y + 3.5:.1f}' " \
               f"fill='{colour}'/>"
    if shape == "diamond":
        return f"<polygon points='{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} {x:.1f},{y + 5:.1f} {x - 5:.1f},{y:.1f}' " \
               f"fill='{colour}'/>"
    return f"<circle cx='{x:.1f}' cy='{y:.1f}' r='3.5' fill='{colour}'/>"


class Panel:
    """One plot area: data coordinates mapped to a pixel rectangle, drawn as SVG elements."""

    def __init__(self, left, top, width, height, x_ticks, y_ticks):
        self.left, self.top, self.width, self.height = left, top, width, height
        self.x_ticks, self.y_ticks = x_ticks, y_ticks
        self.x_range = (x_ticks[0], x_ticks[-1])
        self.y_range = (y_ticks[0], y_ticks[-1])
        self.parts = []
        self.drawn = []  # pixel positions along the plotted lines, to keep the legend off them

    def px(self, x):
        lo, hi = self.x_range
        return self.left + (x - lo) / (hi - lo) * self.width

    def py(self, y):
        lo, hi = self.y_range
        y = min(max(y, lo), hi)  # values above --loss-max sit on the top edge
        return self.top + self.height - (y - lo) / (hi - lo) * self.height

    def text(self, x, y, content, size=12, anchor="middle", extra=""):
        self.parts.append(f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' "
                          f"fill='{TEXT_COLOUR}' {FONT} {extra}>{html.escape(content)}</text>")

    def axes(self, y_label, x_label=None, x_tick_labels=True):
        bottom, right = self.top + self.height, self.left + self.width
        for y in self.y_ticks:
            yy = self.py(y)
            self.parts.append(f"<line x1='{self.left}' y1='{yy:.1f}' x2='{right}' y2='{yy:.1f}' "
                              f"stroke='{GRID_COLOUR}'/>")
            self.parts.append(f"<line x1='{self.left - 5}' y1='{yy:.1f}' x2='{self.left}' y2='{yy:.1f}' "
                              f"stroke='{TEXT_COLOUR}'/>")
            self.text(self.left - 8, yy + 4, tick_label(y, self.y_ticks), anchor="end")
        for x in self.x_ticks:
            xx = self.px(x)
            self.parts.append(f"<line x1='{xx:.1f}' y1='{self.top}' x2='{xx:.1f}' y2='{bottom}' "
                              f"stroke='{GRID_COLOUR}'/>")
            self.parts.append(f"<line x1='{xx:.1f}' y1='{bottom}' x2='{xx:.1f}' y2='{bottom + 5}' "
                              f"stroke='{TEXT_COLOUR}'/>")
            if x_tick_labels:
                self.text(xx, bottom + 19, tick_label(x, self.x_ticks))
        self.parts.append(f"<rect x='{self.left}' y='{self.top}' width='{self.width}' height='{self.height}' "
                          f"fill='none' stroke='{TEXT_COLOUR}'/>")
        centre_y = self.top + self.height / 2
        self.text(self.left - 52, centre_y, y_label, size=13,
                  extra=f"transform='rotate(-90 {self.left - 52} {centre_y:.1f})'")
        if x_label:
            self.text(self.left + self.width / 2, bottom + 40, x_label, size=13)

    def line(self, points, colour, width=2.0, markers=False, dash=None, opacity=None):
        """markers: False, True (circles) or a marker_svg shape; dash: an SVG stroke-dasharray."""
        if not points:
            return
        pixels = [(self.px(x), self.py(y)) for x, y in points]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in pixels)
        self.drawn.extend(pixels)
        for (x0, y0), (x1, y1) in zip(pixels, pixels[1:]):
            self.drawn.extend((x0 + (x1 - x0) * t / 8, y0 + (y1 - y0) * t / 8) for t in range(1, 8))
        self.parts.append(f"<polyline points='{coords}' fill='none' stroke='{colour}' stroke-width='{width}' "
                          f"stroke-linejoin='round'{stroke_style(dash, opacity)}/>")
        if markers:
            self.parts.extend(marker_svg(markers, x, y, colour) for x, y in pixels)

    def legend(self, entries):
        """entries: [(label, colour, width, markers[, dash[, opacity]])], in a box in the corner that covers the fewest
        plotted points (top right first)."""
        if not entries:
            return
        row, box_width = 20, 14 + 34 + 7.2 * max(len(label) for label, *_ in entries)
        box_height = row * len(entries) + 8
        right_x, bottom_y = self.left + self.width - box_width - 10, self.top + self.height - box_height - 10
        corners = [(right_x, self.top + 10), (right_x, bottom_y), (self.left + 10, self.top + 10),
                   (self.left + 10, bottom_y)]

        def covered(corner):
            x, y = corner
            return sum(1 for px, py in self.drawn
                       if x - 6 <= px <= x + box_width + 6 and y - 6 <= py <= y + box_height + 6)

        x0, y0 = min(corners, key=covered)  # min keeps the first of equally good corners
        self.parts.append(f"<rect x='{x0:.1f}' y='{y0:.1f}' width='{box_width:.1f}' height='{box_height}' "
                          "fill='white' fill-opacity='0.9' stroke='#bbbbbb'/>")
        for i, (label, colour, width, markers, *style) in enumerate(entries):
            y = y0 + 4 + row * i + row / 2
            self.parts.append(f"<line x1='{x0 + 8:.1f}' y1='{y:.1f}' x2='{x0 + 36:.1f}' y2='{y:.1f}' "
                              f"stroke='{colour}' stroke-width='{width}'{stroke_style(*style)}/>")
            if markers:
                self.parts.append(marker_svg(markers, x0 + 22, y, colour))
            self.text(x0 + 44, y + 4, label, anchor="start")


def svg_plot(train, valid, title, loss_max=None):
    width, left, right = 900, 80, 24
    panel_width = width - left - right
    bleu_points = [(r["elapsed_s"] / 60, r["bleu"]) for r in valid if "bleu" in r]
    train_points = [(r["elapsed_s"] / 60, r["loss"]) for r in train]
    valid_points = [(r["elapsed_s"] / 60, r["loss"]) for r in valid]
    ema_loss_points = [(r["elapsed_s"] / 60, r["ema_loss"]) for r in valid if "ema_loss" in r]
    ema_bleu_points = [(r["elapsed_s"] / 60, r["ema_bleu"]) for r in valid if "ema_bleu" in r]
    all_points = train_points + valid_points + bleu_points
    if not all_points:
        raise ValueError("no train or valid records to plot")
    x_ticks = nice_ticks(0.0, max(x for x, _ in all_points), count=8)

    losses = [y for _, y in train_points + valid_points + ema_loss_points]
    low, high = min(losses), max(losses)
    if loss_max is not None:
        high = min(high, loss_max)
    loss_panel = Panel(left, 56, panel_width, 330, x_ticks, nice_ticks(min(low, high), high))
    # With a BLEU panel below on the same time axis, the time labels are written once, under it.
    loss_panel.axes("loss (label-smoothed cross entropy)",
                    None if bleu_points else "elapsed training time (minutes)", x_tick_labels=not bleu_points)
    loss_panel.line(train_points, TRAIN_COLOUR, width=1.5)
    loss_panel.line(valid_points, VALID_COLOUR, width=2.5, markers=True)
    loss_panel.line(ema_loss_points, EMA_COLOUR, width=2.5, markers=True)
    entries = []
    if train_points:
        entries.append(("training loss", TRAIN_COLOUR, 1.5, False))
    if valid_points:
        entries.append(("validation loss", VALID_COLOUR, 2.5, True))
    if ema_loss_points:
        entries.append(("validation loss, moving average of the weights", EMA_COLOUR, 2.5, True))
    loss_panel.legend(entries)
    panels = [loss_panel]
    height = 56 + 330 + 60

    if bleu_points:
        bleus = [y for _, y in bleu_points + ema_bleu_points]
        bleu_panel = Panel(left, 56 + 330 + 24, panel_width, 200, x_ticks,
                           nice_ticks(min(0.0, min(bleus)), max(bleus) * 1.1, count=5))
        bleu_panel.axes(SCORE_NAME, "elapsed training time (minutes)")
        bleu_panel.line(bleu_points, BLEU_COLOUR, width=2.5, markers=True)
        bleu_panel.line(ema_bleu_points, EMA_COLOUR, width=2.5, markers=True)
        best_x, best_y = max(bleu_points, key=lambda p: p[1])
        label_x, label_y = bleu_panel.px(best_x), bleu_panel.py(best_y) - 10
        near_right = label_x > bleu_panel.left + bleu_panel.width - 60
        bleu_panel.text(label_x, label_y, f"best {best_y:.2f}", size=12,
                        anchor="end" if near_right else "middle", extra="font-weight='bold'")
        bleu_panel.drawn.extend((label_x + dx, label_y) for dx in range(-70 if near_right else -35, 36, 5))
        bleu_panel.legend([(f"validation {SCORE_NAME} (greedy)", BLEU_COLOUR, 2.5, True)] +
                          ([(f"the moving average's {SCORE_NAME}", EMA_COLOUR, 2.5, True)]
                           if ema_bleu_points else []))
        panels.append(bleu_panel)
        height = 56 + 330 + 24 + 200 + 60

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"viewBox='0 0 {width} {height}'>",
             f"<rect width='{width}' height='{height}' fill='white'/>",
             f"<text x='{width / 2}' y='30' font-size='18' font-weight='bold' text-anchor='middle' "
             f"fill='{TEXT_COLOUR}' {FONT}>{html.escape(title)}</text>"]
    for panel in panels:
        parts.extend(panel.parts)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def compare_main(parser, args):
    # Imported here: the module imports this one (as plot_training, next to it on sys.path).
    import plot_training_compare as compare

    if args.run is not None:
        parser.error("give either RUN or --compare RUN_A RUN_B ..., not both")
    if len(args.compare) < 2:
        parser.error("--compare needs at least two runs")
    try:
        runs = compare.load_runs(args.compare)
    except compare.CompareError as error:
        sys.exit(f"plot_training.py: {error}")
    table = compare.markdown_tables(runs)
    if args.table:
        with open(args.table, "w", encoding="utf-8") as f:
            f.write(table)
    else:
        sys.stdout.write(table)
    if args.svg:
        title = args.title or "Training curves: " + " vs ".join(run.label for run in runs)
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(compare.svg_compare(runs, title, args.loss_max))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Training curve of a tfm train run: Markdown table and SVG plot")
    parser.add_argument("run", nargs="?", help="run directory (holding metrics.jsonl) or a metrics.jsonl file")
    parser.add_argument("--compare", nargs="+", metavar="RUN[=LABEL]",
                        help="compare these runs instead (see tools/plot_training_compare.py): loss against "
                        "step, BLEU against time, and tables of each run and of the validation loss differences")
    parser.add_argument("--table", help="write the Markdown table here instead of stdout")
    parser.add_argument("--svg", help="write the SVG plot here")
    parser.add_argument("--title", help="plot title (default: the run directory's name)")
    parser.add_argument("--loss-max", type=float,
                        help="top of the loss axis (the first training losses are high and squash the rest)")
    args = parser.parse_args(argv)
    if args.compare is not None:
        compare_main(parser, args)
        return
    if args.run is None:
        parser.error("give a RUN, or --compare RUN_A RUN_B ...")

    path = os.path.join(args.run, "metrics.jsonl") if os.path.isdir(args.run) else args.run
    if not os.path.isfile(path):
        parser.error(f"{path}: no such file (is {args.run} a tfm train run directory?)")
    train, valid = read_metrics(path)
    run_name = os.path.basename(os.path.dirname(os.path.abspath(path)))

    table = markdown_table(valid)
    if args.table:
        with open(args.table, "w", encoding="utf-8") as f:
            f.write(table)
    else:
        sys.stdout.write(table)
    if args.svg:
        if not train and not valid:
            parser.error(f"{path}: no train or valid records to plot")
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg_plot(train, valid, args.title or f"Training curve: {run_name}", args.loss_max))


if __name__ == "__main__":
    main()
