"""The --compare mode of tools/plot_training.py: several `tfm train` runs of one recipe on one plot and in two
Markdown tables, to show that a run (say bf16 mixed precision) follows another's (f32) loss curve and what
time it saves.

  tools/plot_training.py --compare RUN_A[=LABEL] RUN_B[=LABEL] [...] [--svg FILE] [--table FILE]
                         [--title TEXT] [--loss-max Y]

The plot has a loss panel against the update step (so that the curves of runs at different speeds lie on top
of each other when they follow each other): validation loss as solid lines with markers, training loss as
lighter dashed lines smoothed by a centred moving mean over TRAIN_SMOOTHING log records. Below it, when the
runs have validation BLEU, a BLEU panel against elapsed minutes (so that the faster run's curve ends sooner).
One colour (and marker shape) per run.

The first table has one row per run (updates, elapsed minutes, best and final validation loss and BLEU); the
second the validation loss of every run at the steps where all of them validated, with each run's difference
from the first run.
"""

import dataclasses
import html
import os

from plot_training import FONT, TEXT_COLOUR, Panel, nice_ticks, read_metrics

RUN_COLOURS = ["#08519c", "#d94801", "#238b45", "#6a51a3", "#a50f15", "#525252"]
RUN_MARKERS = ["circle", "square", "triangle", "diamond"]
TRAIN_SMOOTHING = 5  # log records in the training loss's moving mean: light, the curve keeps its shape
TRAIN_OPACITY = 0.55
TRAIN_DASH = "6,4"


class CompareError(Exception):
    """A run that cannot be compared; the message is one line naming the file."""


@dataclasses.dataclass
class Run:
    label: str
    path: str
    train: list
    valid: list
    colour: str
    marker: str

    @property
    def updates(self):
        return max(r["step"] for r in self.train + self.valid)

    @property
    def minutes(self):
        return max(r["elapsed_s"] for r in self.train + self.valid) / 60

    @property
    def bleu_points(self):
        return [(r["elapsed_s"] / 60, r["bleu"]) for r in self.valid if "bleu" in r]


def split_label(argument):
    """RUN[=LABEL] -> (run, label or None); an existing path containing '=' is a run without a label."""
    if os.path.exists(argument) or "=" not in argument:
        return argument, None
    run, _, label = argument.rpartition("=")
    return run, label


def load_runs(arguments):
    runs = []
    for i, argument in enumerate(arguments):
        run, label = split_label(argument)
        path = os.path.join(run, "metrics.jsonl") if os.path.isdir(run) else run
        if not os.path.isfile(path):
            raise CompareError(f"{path}: no such file (is {run} a tfm train run directory?)")
        train, valid = read_metrics(path)
        if not train and not valid:
            raise CompareError(f"{path}: no train or valid records")
        label = label or os.path.basename(os.path.dirname(os.path.abspath(path)))
        runs.append(Run(label, path, train, valid, RUN_COLOURS[i % len(RUN_COLOURS)],
                        RUN_MARKERS[i % len(RUN_MARKERS)]))
    return runs


def moving_mean(values, window):
    """Centred moving mean; the window shrinks at the ends instead of shifting, so no point moves sideways."""
    half = window // 2
    out = []
    for i in range(len(values)):
        part = values[max(0, i - half):i + half + 1]
        out.append(sum(part) / len(part))
    return out


def common_validations(runs):
    """[(epoch, steps per run, losses per run)]: the validations at steps every run validated at (the same
    recipe and data validate at the same steps); failing that, each run's last validation of every epoch
    all runs reached."""
    by_step = [{r["step"]: r for r in run.valid} for run in runs]
    steps = sorted(set.intersection(*(set(s) for s in by_step)))
    if steps:
        return [(by_step[0][s].get("epoch", ""), [s] * len(runs), [v[s]["loss"] for v in by_step])
                for s in steps]
    by_epoch = [{r["epoch"]: r for r in run.valid if "epoch" in r} for run in runs]
    epochs = sorted(set.intersection(*(set(e) for e in by_epoch)))
    return [(e, [v[e]["step"] for v in by_epoch], [v[e]["loss"] for v in by_epoch]) for e in epochs]


def signed(difference):
    return f"{round(difference, 4) + 0.0:+.4f}"  # + 0.0 turns a rounded -0.0 into +0.0000


def markdown_tables(runs):
    def row(cells):
        return "| " + " | ".join(cells) + " |"

    header = ["run", "updates", "elapsed (min)", "min / 1000 updates", "best valid loss", "at step",
              "best BLEU", "final valid loss", "final BLEU"]
    lines = [row(header), "|:---|" + "---:|" * (len(header) - 1)]
    for run in runs:
        cells = [run.label, str(run.updates), f"{run.minutes:.1f}", f"{run.minutes / run.updates * 1000:.2f}"]
        if run.valid:
            best = min(run.valid, key=lambda r: r["loss"])
            cells += [f"{best['loss']:.4f}", str(best["step"])]
        else:
            cells += ["-", "-"]
        bleus = [r["bleu"] for r in run.valid if "bleu" in r]
        cells.append(f"{max(bleus):.2f}" if bleus else "-")
        final = run.valid[-1] if run.valid else {}
        cells.append(f"{final['loss']:.4f}" if final else "-")
        cells.append(f"{final['bleu']:.2f}" if "bleu" in final else "-")
        lines.append(row(cells))

    lines.append("")
    without = [run.label for run in runs if not run.valid]
    if without:
        lines.append(f"No validation records in {', '.join(without)}: left out of the comparison below.\n")
    runs = [run for run in runs if run.valid]
    rows = common_validations(runs) if len(runs) >= 2 else []
    if not rows:
        lines.append("No two runs to compare have a validation at a common step or epoch.")
        return "\n".join(lines) + "\n"
    first = runs[0].label
    header = ["epoch", "step"] + [f"{run.label} loss" for run in runs] + \
             [f"{run.label} - {first}" for run in runs[1:]]
    lines += [row(header), "|" + "---:|" * len(header)]
    for epoch, steps, losses in rows:
        step = str(steps[0]) if len(set(steps)) == 1 else " / ".join(map(str, steps))
        cells = [str(epoch), step] + [f"{loss:.4f}" for loss in losses] + \
                [signed(loss - losses[0]) for loss in losses[1:]]
        lines.append(row(cells))
    lines.append("")
    for run, index in zip(runs[1:], range(1, len(runs))):
        differences = [losses[index] - losses[0] for _, _, losses in rows]
        largest = max(range(len(rows)), key=lambda i: abs(differences[i]))
        lines.append(f"{run.label} - {first}: mean {signed(sum(differences) / len(rows))}, mean absolute "
                     f"{sum(map(abs, differences)) / len(rows):.4f}, largest {signed(differences[largest])} "
                     f"(step {rows[largest][1][index]}) over {len(rows)} validations.")
    return "\n".join(lines) + "\n"


def svg_compare(runs, title, loss_max=None):
    width, left, right = 900, 80, 24
    panel_width = width - left - right
    train_curves = [list(zip([r["step"] for r in run.train],
                             moving_mean([r["loss"] for r in run.train], TRAIN_SMOOTHING))) for run in runs]
    valid_curves = [[(r["step"], r["loss"]) for r in run.valid] for run in runs]
    losses = [y for curve in train_curves + valid_curves for _, y in curve]
    low, high = min(losses), max(losses)
    if loss_max is not None:
        high = min(high, loss_max)
    loss_top, loss_height = 56, 330
    loss_panel = Panel(left, loss_top, panel_width, loss_height,
                       nice_ticks(0.0, max(run.updates for run in runs), count=8), nice_ticks(min(low, high), high))
    loss_panel.axes("loss (label-smoothed cross entropy)", "update step")
    entries = []
    # Training curves first, so that the validation curves are drawn over them.
    for run, curve in zip(runs, train_curves):
        loss_panel.line(curve, run.colour, width=1.5, dash=TRAIN_DASH, opacity=TRAIN_OPACITY)
    for run, curve in zip(runs, valid_curves):
        loss_panel.line(curve, run.colour, width=2.5, markers=run.marker)
    for run, train_curve, valid_curve in zip(runs, train_curves, valid_curves):
        if valid_curve:
            entries.append((f"{run.label}: validation loss", run.colour, 2.5, run.marker))
        if train_curve:
            entries.append((f"{run.label}: training loss", run.colour, 1.5, False, TRAIN_DASH, TRAIN_OPACITY))
    loss_panel.legend(entries)
    loss_bottom = loss_top + loss_height
    loss_panel.text(left, loss_bottom + 62, f"Training loss: centred moving mean over {TRAIN_SMOOTHING} log records "
                    "(dashed, lighter). Validation loss: solid, one marker per validation.", size=11,
                    anchor="start", extra="font-style='italic'")
    panels = [loss_panel]
    height = loss_bottom + 80

    bleu_runs = [run for run in runs if run.bleu_points]
    if bleu_runs:
        bleu_top, bleu_height = loss_bottom + 100, 240
        bleus = [y for run in bleu_runs for _, y in run.bleu_points]
        bleu_panel = Panel(left, bleu_top, panel_width, bleu_height,
                           nice_ticks(0.0, max(x for run in bleu_runs for x, _ in run.bleu_points), count=8),
                           nice_ticks(min(0.0, min(bleus)), max(bleus) * 1.1, count=5))
        bleu_panel.axes("validation BLEU (greedy)", "elapsed training time (minutes)")
        for run in bleu_runs:
            bleu_panel.line(run.bleu_points, run.colour, width=2.5, markers=run.marker)
            # A tick at the run's last validation marks where its time ran out.
            end_x, end_y = run.bleu_points[-1]
            x = bleu_panel.px(end_x)
            bleu_panel.parts.append(f"<line x1='{x:.1f}' y1='{bleu_panel.py(end_y) + 8:.1f}' x2='{x:.1f}' "
                                    f"y2='{bleu_top + bleu_height:.1f}' stroke='{run.colour}' "
                                    "stroke-dasharray='2,3'/>")
        bleu_panel.legend([(f"{run.label}: best {max(y for _, y in run.bleu_points):.2f}, "
                            f"{run.bleu_points[-1][0]:.1f} min", run.colour, 2.5, run.marker)
                           for run in bleu_runs])
        panels.append(bleu_panel)
        height = bleu_top + bleu_height + 60

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"viewBox='0 0 {width} {height}'>",
             f"<rect width='{width}' height='{height}' fill='white'/>",
             f"<text x='{width / 2}' y='30' font-size='18' font-weight='bold' text-anchor='middle' "
             f"fill='{TEXT_COLOUR}' {FONT}>{html.escape(title)}</text>"]
    for panel in panels:
        parts.extend(panel.parts)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"

