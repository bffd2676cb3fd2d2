"""Plots and a self-contained HTML report of one run or of a comparison of curricula over seeds.

Everything shown is read from run folders (``metrics.jsonl``, ``warmstart.json``, ``config.yaml``); nothing
is recomputed or invented. ``genenv report RUN_DIR`` writes ``RUN_DIR/report.html`` and ``RUN_DIR/plots/``;
``genenv compare`` writes the same for a whole comparison (``DIR/report.html``, ``DIR/summary.json``).
"""

from __future__ import annotations

import base64
import html
import io
import math
import textwrap
from pathlib import Path

import numpy as np

from genenv.analysis import RunRecord, load_run, summarize
from genenv.io import atomic_write_json, atomic_write_text

PLOTS = {
    "heldout_vs_rollouts": "Held-out success (greedy) against agent rollouts",
    "p_hat": "Success rate p_hat of the curriculum's tasks per epoch, and band-hit rate",
    "difficulty": "Difficulty of the curriculum's tasks per epoch",
    "response_length": "Agent response length per epoch",
    "invalid_rate": "Invalid simulator outputs per epoch",
    "heldout_by_level": "Final held-out success per difficulty level",
    "p_hat_histogram": "Where the curriculum's tasks sit: share of tasks per p_hat bin, per epoch",
    "train_by_level": "The agent's success per level on its training rollouts, per epoch (the frontier)",
    "simulator_kl": "The simulator's KL to its initial (warm-started) policy, per epoch",
}


# ============================================================================ plots

def _plt():
    """pyplot on the headless Agg backend, chosen only when a report is drawn (importing genenv.report must
    not change the backend of a notebook that imports it)."""
    import matplotlib  # noqa: PLC0415 (see the docstring)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def _colors(labels):
    cmap = _plt().get_cmap("tab10")
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (the first points average what exists so far)."""
    if window <= 1 or values.size == 0:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    out = np.empty_like(values, dtype=float)
    for i in range(values.size):
        lo = max(0, i + 1 - window)
        out[i] = (cumsum[i + 1] - cumsum[lo]) / (i + 1 - lo)
    return out


def _per_epoch_band(runs: list[RunRecord], key: str, window: int):
    """Epochs, mean over seeds of the smoothed series, and its min/max over seeds."""
    curves = []
    for r in runs:
        epochs, values = r.series(key)
        if values.size:
            curves.append((epochs, smooth(values, window)))
    if not curves:
        return None
    common = sorted(set.intersection(*[set(e.tolist()) for e, _ in curves]))
    if not common:
        return None
    stack = np.array([[dict(zip(e.tolist(), v.tolist()))[x] for x in common] for e, v in curves])
    return np.asarray(common), stack.mean(0), stack.min(0), stack.max(0)


def _window(groups) -> int:
    epochs = max((len(r.rows) for runs in groups.values() for r in runs), default=1)
    return max(1, min(10, epochs // 20))


SHORT_SERIES = 12   # a series with at most this many points is drawn with markers (one point is otherwise invisible)
RATE_KEYS = {"invalid_rate", "p_hat_mean", "band_hit_rate", "effective_fraction", "train_success_mean"}


def _integer_epochs(ax, last_epoch: int | None = None) -> None:
    """Epoch axes tick at whole epochs and, given the runs' last epoch, span all of them (a series logged at one
    epoch only, such as the simulator's KL in a short run, sits at its epoch, not alone on a 0.95-1.05 axis)."""
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415 (matplotlib is imported with the first figure)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if last_epoch is not None:
        pad = max(0.2, 0.02 * last_epoch)
        ax.set_xlim(-pad, last_epoch + pad)


def _last_epoch(groups) -> int:
    return max((row["epoch"] for runs in groups.values() for r in runs for row in r.rows), default=0)


def _rate_axis(ax) -> None:
    """A rate's axis spans [0, 1] (a constant or a small dip is shown at its true size, not zoomed to fill)."""
    ax.set_ylim(-0.02, 1.02)


def _marker(points: int) -> str | None:
    return "o" if points <= SHORT_SERIES else None


def plot_heldout(groups, ax):
    colors = _colors(groups)
    for label, runs in groups.items():
        curves = [r.eval_curve() for r in runs]
        curves = [c for c in curves if c[0].size]
        if not curves:
            continue
        length = min(c[0].size for c in curves)
        xs = np.mean([c[0][:length] for c in curves], axis=0)
        ys = np.array([c[1][:length] for c in curves])
        ax.plot(xs, ys.mean(0), color=colors[label], label=f"{label} (n={len(curves)})", lw=2,
                marker=_marker(len(xs)), ms=3)
        if len(curves) > 1:
            ax.fill_between(xs, ys.min(0), ys.max(0), color=colors[label], alpha=0.15)
    ax.set_xlabel("agent rollouts")
    ax.set_ylabel("held-out success")
    _rate_axis(ax)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)


def plot_p_hat(groups, axes, alpha: float, k_min: float):
    colors, window = _colors(groups), _window(groups)
    ax, ax_band = axes
    ax.axhspan(alpha - k_min, alpha + k_min, color="green", alpha=0.12, label="alpha +- k_min")
    ax.axhline(alpha, color="green", lw=1, ls="--")
    drawn = False
    for label, runs in groups.items():
        band = _per_epoch_band(runs, "p_hat_mean", window)
        if band is not None:
            drawn = True
            epochs, mean, lo, hi = band
            ax.plot(epochs, mean, color=colors[label], label=label, lw=1.6, marker=_marker(len(epochs)), ms=3)
            ax.fill_between(epochs, lo, hi, color=colors[label], alpha=0.12)
        band = _per_epoch_band(runs, "band_hit_rate", window)
        if band is not None:
            ax_band.plot(band[0], band[1], color=colors[label], label=label, lw=1.6, marker=_marker(len(band[0])),
                         ms=3)
    if not drawn:  # e.g. a simulator that wrote no valid task: nothing was scored
        for target in axes:
            target.text(0.5, 0.5, "no scored tasks in these runs", ha="center", va="center",
                        transform=target.transAxes)
    _rate_axis(ax)
    ax.set_ylabel("p_hat")
    ax.set_xlabel("epoch")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    _integer_epochs(ax, _last_epoch(groups))
    _integer_epochs(ax_band, _last_epoch(groups))
    _rate_axis(ax_band)
    ax_band.set_ylabel("band-hit rate")
    ax_band.set_xlabel("epoch")
    ax_band.grid(alpha=0.3)


def plot_metric(groups, ax, key: str, ylabel: str):
    colors, window = _colors(groups), _window(groups)
    drawn, highest = False, 0.0
    for label, runs in groups.items():
        band = _per_epoch_band(runs, key, window)
        if band is None:
            continue
        epochs, mean, lo, hi = band
        highest = max(highest, float(np.nanmax(hi)), float(np.nanmax(mean)))
        ax.plot(epochs, mean, color=colors[label], label=label, lw=1.6, marker=_marker(len(epochs)), ms=3)
        ax.fill_between(epochs, lo, hi, color=colors[label], alpha=0.12)
        drawn = True
    if not drawn:
        ax.text(0.5, 0.5, f"no data in these runs ({key} is never recorded)", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    _integer_epochs(ax, _last_epoch(groups))
    if key in RATE_KEYS:
        _rate_axis(ax)
    elif drawn:   # counts, lengths, levels, KL: never negative, drawn from 0 so a small change looks small
        ax.set_ylim(0, max(1.08 * highest, 1e-3))   # the highest point clear of the frame
    if drawn:
        ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)


def plot_levels(groups, ax):
    colors = _colors(groups)
    labels = list(groups)
    levels = sorted({lv for runs in groups.values() for r in runs if r.rows
                     for lv in (r.rows[-1].get("heldout_by_level") or {})}, key=lambda v: int(v))
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        values = []
        for lv in levels:
            seeds = [r.rows[-1]["heldout_by_level"].get(lv) for r in groups[label]
                     if r.rows and r.rows[-1].get("heldout_by_level")]
            seeds = [v for v in seeds if v is not None]
            values.append(np.mean(seeds) if seeds else np.nan)
        ax.bar(np.arange(len(levels)) + i * width, values, width, color=colors[label], label=label)
    ax.set_xticks(np.arange(len(levels)) + width * (len(labels) - 1) / 2)
    ax.set_xticklabels(levels)
    ax.set_xlabel("difficulty level")
    ax.set_ylabel("held-out success (final)")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")


def reference_label(groups: dict, preferred: str | None = None) -> str:
    """The arm a comparison is paired against and whose simulator the report plots: ``preferred`` when it has
    runs, else genenv, else the first."""
    if preferred in groups:
        return preferred
    return "genenv" if "genenv" in groups else next(iter(groups))


def make_figures(groups: dict[str, list[RunRecord]], reference: str | None = None) -> dict[str, bytes]:
    """Every plot of ``PLOTS`` as PNG bytes (the simulator's plots show ``reference``'s runs)."""
    plt = _plt()
    first = next(r for runs in groups.values() for r in runs)
    cr = first.config.get("curriculum_reward", {})
    alpha, k_min = float(cr.get("alpha", 0.5)), float(cr.get("k_min", 0.1))
    figures = {}

    def render(fig) -> bytes:
        buffer = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buffer, format="png", dpi=110)
        plt.close(fig)
        return buffer.getvalue()

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    plot_heldout(groups, ax)
    ax.set_title("held-out success vs agent rollouts (line: mean over seeds; band: min-max)")
    figures["heldout_vs_rollouts"] = render(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    plot_p_hat(groups, axes, alpha, k_min)
    axes[0].set_title("p_hat of the curriculum's tasks (smoothed); shaded: target band")
    axes[1].set_title(f"share of {'tasks' if cr.get('p_hat_level') == 'task' else 'batches'} inside the band "
                      "(smoothed)")
    figures["p_hat"] = render(fig)

    for key, title, ylabel in (("difficulty", "difficulty of generated / drawn tasks (mean level)", "level"),
                               ("response_length", "agent response length (tokens)", "tokens"),
                               ("invalid_rate", "invalid simulator outputs (generative curricula)", "share")):
        fig, ax = plt.subplots(figsize=(7.5, 4.0))
        metric = {"difficulty": "difficulty_mean", "response_length": "response_length_mean",
                  "invalid_rate": "invalid_rate"}[key]
        plot_metric(groups, ax, metric, ylabel)
        ax.set_title(title)
        figures[key] = render(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    plot_levels(groups, ax)
    ax.set_title("final held-out success per level (mean over seeds)")
    figures["heldout_by_level"] = render(fig)

    label = reference_label(groups, reference)
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    plot_p_hat_histogram(groups[label], ax, alpha, k_min)
    ax.set_title(f"{label}: share of its tasks per p_hat bin (mean over seeds)")
    figures["p_hat_histogram"] = render(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    plot_train_by_level(groups[label], ax, _window(groups))
    ax.set_title(f"{label}: success on training rollouts per level (smoothed, mean over seeds)")
    figures["train_by_level"] = render(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    plot_metric(groups, ax, "env_kl_to_initial", "KL (nats per task)")
    ax.set_title("simulator: KL to its initial policy after each update")
    figures["simulator_kl"] = render(fig)
    return figures


def plot_p_hat_histogram(runs: list[RunRecord], ax, alpha: float, k_min: float):
    """Stacked shares of the p_hat bins per epoch, averaged over seeds (epochs without tasks left blank)."""
    shares: dict[int, list[np.ndarray]] = {}
    for record in runs:
        for row in record.rows:
            counts = np.asarray(row.get("p_hat_histogram") or [], dtype=float)
            if counts.sum() > 0:
                shares.setdefault(row["epoch"], []).append(counts / counts.sum())
    if not shares:
        ax.text(0.5, 0.5, "no data in these runs", ha="center", va="center", transform=ax.transAxes)
        return
    epochs = sorted(shares)
    mean = np.array([np.mean(shares[e], axis=0) for e in epochs]).T
    bins = mean.shape[0]
    labels = [f"{i / bins:.1f}-{(i + 1) / bins:.1f}" for i in range(bins)]
    ax.stackplot(epochs, mean, labels=labels, colors=_plt().get_cmap("RdYlGn")(np.linspace(0.1, 0.9, bins)))
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"share of tasks (band: {alpha - k_min:.2f}-{alpha + k_min:.2f})")
    ax.set_ylim(0, 1)
    _integer_epochs(ax, _last_epoch({"": runs}))
    ax.set_xlim(min(epochs), max(max(epochs), min(epochs) + 1))
    ax.legend(title="p_hat", fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # beside, not over


def plot_train_by_level(runs: list[RunRecord], ax, window: int):
    levels = sorted({k for r in runs for row in r.rows for k in (row.get("train_success_by_level") or {})},
                    key=lambda k: int(k) if k.isdigit() else k)
    cmap = _plt().get_cmap("viridis")
    for i, level in enumerate(levels):
        per_epoch: dict[int, list[float]] = {}
        for record in runs:
            for row in record.rows:
                value = (row.get("train_success_by_level") or {}).get(level)
                if value is not None:
                    per_epoch.setdefault(row["epoch"], []).append(value)
        epochs = sorted(per_epoch)
        values = smooth(np.array([np.mean(per_epoch[e]) for e in epochs]), window)
        ax.plot(epochs, values, color=cmap(i / max(1, len(levels) - 1)), label=f"level {level}", lw=1.4,
                marker=_marker(len(epochs)), ms=3)
    if not levels:
        ax.text(0.5, 0.5, "no data in these runs", ha="center", va="center", transform=ax.transAxes)
        return
    ax.set_xlabel("epoch")
    ax.set_ylabel("success")
    ax.set_ylim(-0.02, 1.02)
    _integer_epochs(ax, _last_epoch({"": runs}))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # beside the data, not over it
    ax.grid(alpha=0.3)


# ============================================================================ HTML

def _fmt(value, spec=".3f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def has_step_accuracy(summary: dict) -> bool:
    return any(s.get("heldout_step_accuracy_final", {}).get("n") for s in summary["curricula"].values())


def results_columns(summary: dict) -> list[tuple[str, str, list[str]]]:
    """The comparison's columns, one cell per curriculum: (key, header, cells). Both the HTML report and the
    text table of ``genenv compare`` are drawn from these (the text table shows the keys in TEXT_COLUMNS)."""
    curricula = summary["curricula"]

    def column(key, header, cell):
        return key, header, [cell(s) for s in curricula.values()]

    def reach(s):
        r = s["rollouts_to_target"]
        return (f"{_fmt(r['mean_where_reached'], ',.0f')} ({r['reached']}/{r['of']} seeds)" if r["reached"]
                else f"never (0/{r['of']})")
    columns = [
        ("curriculum", "curriculum", list(curricula)),
        column("information", "knows (beyond the paper's seed tasks, verifier and rollouts)",
               lambda s: s.get("information") or "?"),
        column("seeds", "seeds", lambda s: str(len(s["seeds"]))),
        column("final", "held-out final (mean +- std over seeds)",
               lambda s: _fmt(s['heldout_final']['mean']) + (f" +- {_fmt(s['heldout_final']['std'])}"
                                                              if s['heldout_final'].get('n', 0) > 1 else " (1 seed)")),
        column("per_seed", "per seed", lambda s: " ".join(_fmt(v) for v in s["heldout_final"]["per_seed"])),
    ]
    if has_step_accuracy(summary):
        columns += [column("single_step", "single-step final (mean +- std)",
                           lambda s: f"{_fmt(s['heldout_step_accuracy_final']['mean'])} +- "
                                     f"{_fmt(s['heldout_step_accuracy_final']['std'])}"),
                    column("single_step_per_seed", "single-step per seed",
                           lambda s: " ".join(_fmt(v) for v in s["heldout_step_accuracy_final"]["per_seed"]))]
    columns += [
        column("auc", "AUC", lambda s: _fmt(s["auc"]["mean"])),
        column("tasks", "training tasks", lambda s: _fmt(s["samples_used"]["mean"], ",.0f")),
        column("rollouts", "agent rollouts", lambda s: _fmt(s["rollouts"]["mean"], ",.0f")),
        column("updates", "agent updates", lambda s: _fmt(s["agent_updates"]["mean"], ".0f")),
        column("reach", f"rollouts to reach {_fmt(summary.get('target_success'))}", reach),
        column("paired_reach", f"rollouts to reach {summary.get('reference')}'s final, per seed (multiple of its "
               "own)", lambda s: _paired_text(s["paired_to_reference_final"])),
        ("difference", f"{summary.get('reference')} minus it, final (95% CI; seeds it wins)",
         ["(the reference)" if label == summary.get("reference") else
          _difference_text(s["reference_minus_this"]["final"]) for label, s in curricula.items()]),
        ("robust", f"the same, BCa 95% CI; P({summary.get('reference')} > it)",
         ["(the reference)" if label == summary.get("reference") else
          _robust_text(s["reference_minus_this"]["final"]) for label, s in curricula.items()]),
        column("p_hat", "p_hat (epoch >= 2)", lambda s: _fmt(s["p_hat_mean_from_epoch_2"]["mean"])),
        column("band", "band hit (epoch >= 2)", lambda s: _fmt(s["band_hit_rate_from_epoch_2"]["mean"], ".2f")),
    ]
    return columns


# the text table's columns and their short headers (a 100-column terminal; report.html has every column, explained)
TEXT_COLUMNS = {"curriculum": "arm", "seeds": "seeds", "final": "held-out final", "single_step": "single-step",
                "auc": "AUC", "reach": "to reach {target}", "difference": "minus it [95% CI] wins"}


COLUMNS_EXPLAINED = (
    "<p class='note'><b>The columns.</b> <i>knows</i>: what the arm's method is given beyond the paper's (the seed "
    "tasks, the verifier, the agent's rollouts): the domain's difficulty levels or its generator are the oracle's "
    "information. <i>held-out final</i>: greedy success on the held-out set after the last epoch, mean and spread "
    "over seeds. <i>minus it</i>: the reference arm's final success minus this arm's, paired by seed (the same "
    "warm start), with a 95% bootstrap interval over seeds and the seeds the reference is ahead. <i>the same, "
    "BCa</i>: scipy's bias-corrected and accelerated interval of that difference, and the probability that a "
    "seed's run of the reference beats one of this arm (rliable's probability of improvement; 0.5: no edge). "
    "<i>AUC</i>: the "
    "area under the held-out curve over agent rollouts, normalised to [0, 1]. <i>training tasks</i>: the pool's "
    "size at the end. <i>agent updates</i>: GRPO steps. <i>rollouts to reach</i>: agent rollouts until held-out "
    "success first reaches the target (mean over the seeds that reach it). <i>p_hat</i> and <i>band hit</i>: the "
    "mean success of the arm's tasks and the share of them with |p_hat - alpha| &lt;= k_min, from epoch 2 on "
    "(epochs 0-1 are left out: the warm start's first tasks say little about the curriculum).</p>")


def results_table(summary: dict) -> str:
    """The paper's ablation table as HTML, one row per curriculum, with the seed spread."""
    columns = results_columns(summary)
    head = "".join(f"<th>{html.escape(header)}</th>" for _, header, _ in columns)
    rows = ["".join(f"<td>{html.escape(cells[i])}</td>" for _, _, cells in columns)
            for i in range(len(summary["curricula"]))]
    return f"<table><tr>{head}</tr>{''.join(f'<tr>{row}</tr>' for row in rows)}</table>"


def text_table(summary: dict) -> str:
    """The main numbers as plain text within 100 columns (``genenv compare`` prints it): the columns in
    TEXT_COLUMNS, "minus it" being the reference arm (marked "(the reference)") minus each arm, paired by seed."""
    by_key = {key: cells for key, _, cells in results_columns(summary)}
    columns = [(key, header.format(target=_fmt(summary.get("target_success"))), by_key[key])
               for key, header in TEXT_COLUMNS.items() if key in by_key]
    widths = [max(len(header), *(len(cell) for cell in cells)) for _, header, cells in columns]
    lines = ["  ".join(header.ljust(w) for (_, header, _), w in zip(columns, widths))]
    for i in range(len(summary["curricula"])):
        lines.append("  ".join(cells[i].ljust(w) for (_, _, cells), w in zip(columns, widths)))
    if summary.get("oracle_gain_recovered"):
        lines.append(textwrap.fill(oracle_gain_text(summary), width=100, subsequent_indent="  "))
    lines += [textwrap.fill(f"{label} knows: {s.get('information') or '?'}", width=100, subsequent_indent="  ")
              for label, s in summary["curricula"].items()]
    return "\n".join(line.rstrip() for line in lines)


def oracle_gain_text(summary: dict) -> str:
    """One line: the share of the oracle's gain over random that the reference recovers."""
    gain, reference = summary["oracle_gain_recovered"], summary.get("reference")
    head = (f"{reference} recovers of the oracle's gain over random (final held-out, paired over "
            f"{len(gain['seeds'])} seeds): ")
    if gain["ratio"] is None:
        return head + f"undefined (the oracle gains {_fmt(gain['ceiling_gain'], '+.3f')} over random)"
    interval = gain["ci95"]
    ci = f" [95% CI {interval[0]:.0%}, {interval[1]:.0%}]" if interval else ""
    text = (head + f"{gain['ratio']:.0%}{ci} ({reference} {gain['reference_gain']:+.3f}, oracle "
            f"{gain['ceiling_gain']:+.3f})")
    ceiling = gain.get("ceiling_gain_ci95")
    if ceiling and ceiling[0] <= 0:
        text += (f"; the oracle's own gain is not distinguishable from 0 ([{ceiling[0]:+.3f}, {ceiling[1]:+.3f}]), "
                 "so this share says little")
    return text


def _difference_text(paired: dict) -> str:
    if not paired["of"]:
        return "-"
    interval = paired["ci95"]
    ci = f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else ""
    return f"{paired['mean']:+.3f}{ci} {paired['wins']}/{paired['of']}"


def _robust_text(paired: dict) -> str:
    """The BCa interval and the probability of improvement (summaries written before they existed: "-")."""
    interval, probability = paired.get("ci95_bca"), paired.get("probability_of_improvement")
    ci = f"[{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else "-"
    return f"{ci}; {probability:.2f}" if probability is not None else ci


def _paired_text(paired: dict) -> str:
    return ", ".join("never" if row["rollouts"] is None else f"{row['ratio']:.2f}x" if row["ratio"] is not None
                     else "at start" for row in paired["per_seed"]) or "-"


def level_table(summary: dict) -> str:
    levels = sorted({lv for s in summary["curricula"].values() for lv in s["heldout_by_level"]},
                    key=lambda v: int(v) if v.isdigit() else 0)
    head = "<tr><th>curriculum</th>" + "".join(f"<th>level {lv}</th>" for lv in levels) + "</tr>"
    rows = "".join(f"<tr><td>{html.escape(label)}</td>" + "".join(
        f"<td>{_fmt(s['heldout_by_level'].get(lv), '.2f')}</td>" for lv in levels) + "</tr>"
        for label, s in summary["curricula"].items())
    return f"<table>{head}{rows}</table>"


STYLE = """body{font-family:system-ui,sans-serif;max-width:1250px;margin:24px auto;padding:0 16px;color:#222}
table{border-collapse:collapse;margin:12px 0;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;
text-align:right}td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}
figure{margin:18px 0}figcaption{color:#555;font-size:14px;margin-top:4px}img{max-width:100%}
.note{color:#555;font-size:14px}code{background:#f4f4f4;padding:0 3px}"""


def split_note(groups: dict[str, list[RunRecord]]) -> str:
    """The data split in one paragraph: sizes of the sets, and the levels too small to split without cost."""
    splits = [r.data_split for runs in groups.values() for r in runs if r.data_split]
    if not splits:
        return ""
    first = splits[0]
    small = list(dict.fromkeys(sentence for split in splits for sentence in split.get("small_levels", [])))
    text = (f"Data split: {first['heldout_tasks']} held-out and {first['dev_tasks']} dev tasks; no task of either "
            f"is trained on (seed tasks, generated tasks and fixed sets that equal one are rejected and counted).")
    if small:
        text += " Levels too small to split: " + "; ".join(html.escape(s) for s in small) + "."
    return f"<p class='note' id='data-split'>{text}</p>"


def write_report(out_dir: str | Path, groups: dict[str, list[RunRecord]], title: str,
                 summary: dict | None = None, intro: str = "") -> Path:
    """``out_dir/report.html`` (every plot embedded) and ``out_dir/plots/*.png``; returns the HTML path."""
    out_dir = Path(out_dir)
    groups = {k: v for k, v in groups.items() if v}
    if not groups:
        raise ValueError("nothing to report: no run with metrics")
    summary = summary or summarize(groups)
    figures = make_figures(groups, summary.get("reference"))
    for name, png in figures.items():
        path = out_dir / "plots" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
    first = next(r for runs in groups.values() for r in runs)
    cr = first.config.get("curriculum_reward", {})
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    if intro:
        parts.append(f"<p>{intro}</p>")
    parts.append(
        f"<p class='note'>Domain <code>{html.escape(str(first.config.get('domain', {}).get('name')))}</code>, "
        f"alpha = {cr.get('alpha')}, beta = {cr.get('beta')}, k_min = {cr.get('k_min')}, lambda = {cr.get('lam')}; "
        f"{first.epochs_planned} epochs planned. Every number and curve below is read from the runs' "
        "<code>metrics.jsonl</code>; held-out success is greedy, on a fixed set never trained on. "
        f"p_hat (per {html.escape(str(cr.get('p_hat_level', 'batch')))}), the band-hit rate and difficulty describe "
        "the tasks each curriculum chose: the simulator's valid generations for genenv and random, the drawn "
        "tasks (in batches of env.variations) for static, offline and learnability.</p>")
    parts.append(split_note(groups))
    parts.append("<h2>Results</h2>" + results_table(summary) + COLUMNS_EXPLAINED)
    if summary.get("oracle_gain_recovered"):
        parts.append(f"<p>{html.escape(oracle_gain_text(summary))}</p>")
    parts.append("<h3>Final held-out success per level (mean over seeds)</h3>" + level_table(summary))
    for name, caption in PLOTS.items():
        data = base64.b64encode(figures[name]).decode()
        parts.append(f"<figure id='{name}'><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    runs_list = "".join(f"<li><code>{html.escape(str(r.path))}</code>: {html.escape(label)}, seed {r.seed}, "
                        f"{len(r.rows)} epochs</li>" for label, runs in groups.items() for r in runs)
    parts.append(f"<h2>Runs</h2><ul>{runs_list}</ul></body></html>")
    target = out_dir / "report.html"
    atomic_write_text(target, "".join(parts))
    return target


def report_run(run_dir: str | Path) -> Path:
    """Report of a single run folder (``genenv report RUN_DIR``)."""
    record = load_run(run_dir)
    summary = summarize({record.label: [record]}, reference=record.label)
    atomic_write_json(Path(run_dir) / "summary.json", summary)
    return write_report(run_dir, {record.label: [record]}, f"genenv run: {Path(run_dir).name}", summary)
