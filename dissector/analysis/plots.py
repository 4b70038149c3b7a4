"""Matplotlib figures of the analyses. Each function returns its `Figure`, built without
pyplot (no GUI backend, nothing global): show it in Jupyter by leaving it as a cell's value,
save it with `fig.savefig(path)`."""

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .errors import errors
from .groups import group_generations, group_timeline
from .lag import lag
from .latency import latency
from .throughput import throughput

SIZE = (9, 4)


def _figure(title, size=SIZE):
    fig = Figure(figsize=size, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    return fig, ax


def _empty(ax, what):
    ax.text(
        0.5, 0.5, f"no {what} in this capture", ha="center", va="center", transform=ax.transAxes
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _time_axis(ax, label="time (UTC)"):
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel(label)


def latency_over_time(pairs, freq="1s", stat="p95_ms", apis=None):
    """One line per API: the latency percentile `stat` (p50_ms, p95_ms, p99_ms, max_ms) per
    time window."""
    fig, ax = _figure(f"latency {stat.removesuffix('_ms')} per {freq}")
    data = latency(pairs, by="api", freq=freq)
    if apis is not None:
        data = data[data["api_name"].isin(apis)]
    if data.empty:
        _empty(ax, "answered requests")
        return fig
    for api, group in data.groupby("api_name"):
        ax.plot(group["window"], group[stat], marker=".", label=api)
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.legend(fontsize="small", ncols=2)
    _time_axis(ax)
    return fig


def latency_heatmap(pairs, freq="1s", stat="p95_ms"):
    """APIs by time window, coloured by the latency percentile `stat` (log scale)."""
    fig, ax = _figure(f"latency {stat.removesuffix('_ms')} per API and {freq}")
    data = latency(pairs, by="api", freq=freq)
    if data.empty:
        _empty(ax, "answered requests")
        return fig
    grid = data.pivot(index="api_name", columns="window", values=stat)
    shown = np.log10(grid.to_numpy(dtype=float).clip(min=1e-3))
    image = ax.imshow(
        np.ma.masked_invalid(shown), aspect="auto", cmap="viridis", interpolation="nearest"
    )
    ax.set_yticks(range(len(grid.index)), grid.index)
    step = max(1, len(grid.columns) // 8)
    ax.set_xticks(
        range(0, len(grid.columns), step), [t.strftime("%H:%M:%S") for t in grid.columns[::step]]
    )
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("log10 ms")
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_xlabel("window start (UTC)")
    return fig


def throughput_over_time(partitions, freq="1s", by="topic", value="bytes_per_s"):
    """One line per API and topic (or `by`): bytes/s (or `value`, e.g. records_per_s)."""
    fig, ax = _figure(f"{value.replace('_per_s', '')} per second, per {freq}")
    data = throughput(partitions, freq=freq, by=by)
    if data.empty or value not in data:
        _empty(ax, "record data")
        return fig
    keys = ["api_name", *([c for c in ("topic", "partition", "client_id") if c in data])]
    for key, group in data.groupby(keys, dropna=False):
        label = " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
        ax.plot(group["window"], group[value], marker="o", drawstyle="steps-post", label=label)
    ax.set_ylabel(value.replace("_", " "))
    ax.legend(fontsize="small")
    _time_axis(ax)
    return fig


def error_timeline(pairs):
    """Every error and incomplete exchange over time: one row per error name, one colour
    per API."""
    fig, ax = _figure("errors over time")
    data = errors(pairs)
    if data.empty:
        _empty(ax, "errors")
        return fig
    data = data.assign(what=data["error_name"].fillna(data["status"]))
    names = sorted(data["what"].unique())
    for api, group in data.groupby("api_name", dropna=False):
        ax.scatter(group["time"], group["what"].map(names.index), label=api, s=24)
    ax.set_yticks(range(len(names)), names)
    ax.legend(fontsize="small")
    _time_axis(ax)
    return fig


def group_gantt(pairs, group_id=None):
    """Members per generation as a Gantt chart: one row per member (client id), one bar per
    generation it was in, from the end of its JoinGroup to the next generation (or its
    LeaveGroup, or its last group exchange); the rebalances are shaded."""
    gens = group_generations(pairs)
    if group_id is not None:
        gens = gens[gens["group_id"] == group_id]
    title = f"group {group_id or ', '.join(gens['group_id'].unique())}: members per generation"
    fig, ax = _figure(title, (9, 1.6 + 0.45 * max(1, _members(gens))))
    if gens.empty:
        _empty(ax, "consumer group generations")
        return fig
    events = group_timeline(pairs)
    last = events.groupby("client_id")["end"].max()
    left = events[events["api_name"] == "LeaveGroup"].groupby("client_id")["time"].min()
    clients = sorted({c for m in gens["member_client_ids"] for c in m.values() if c})
    colours = [f"C{i % 10}" for i in range(len(gens))]
    for i, gen in enumerate(gens.itertuples(index=False)):
        nxt = gens.iloc[i + 1]["joined"] if i + 1 < len(gens) else pd.NaT
        ax.axvspan(gen.started, gen.synced, color="grey", alpha=0.15, lw=0)
        for member, client in gen.member_client_ids.items():
            end = min(t for t in (nxt, left.get(client), last.get(client)) if pd.notna(t))
            start = gen.joined
            if pd.isna(start) or end <= start:
                continue
            y = clients.index(client)
            ax.barh(
                y,
                end - start,
                left=start,
                height=0.6,
                color=colours[i],
                edgecolor="black",
                linewidth=0.4,
            )
            role = "*" if member == gen.leader else ""
            ax.text(
                start + (end - start) / 2,
                y,
                f"g{gen.generation_id}{role}",
                ha="center",
                va="center",
                fontsize="small",
            )
    ax.set_yticks(range(len(clients)), clients)
    ax.invert_yaxis()
    _time_axis(ax, "time (UTC); * leader, shaded: rebalancing")
    return fig


def _members(gens):
    return len({c for m in gens["member_client_ids"] for c in m.values()}) if len(gens) else 1


def lag_over_time(partitions, pairs=None, source="commit"):
    """Lag per topic and partition over time (`source` "commit" or "fetch"), as steps."""
    fig, ax = _figure(f"consumer lag ({source})")
    data = lag(partitions, pairs)
    data = data[(data["source"] == source) & data["lag"].notna()]
    if data.empty:
        _empty(ax, f"{source} lag")
        return fig
    keys = (
        ["group_id", "topic", "partition"]
        if data["group_id"].notna().any()
        else ["topic", "partition"]
    )
    for key, group in data.groupby(keys, dropna=False):
        label = " ".join(str(k) for k in key)
        ax.step(group["time"], group["lag"].astype(float), where="post", marker=".", label=label)
    ax.set_ylabel("records behind the high watermark")
    ax.legend(fontsize="small")
    _time_axis(ax)
    return fig


def delivery_delays(matched):
    """Produce-to-fetch delay of each record (`delivery(...)`) by when it was produced, one
    colour per consumer."""
    fig, ax = _figure("produce-to-fetch delay per record")
    if matched is None or matched.empty:
        _empty(ax, "records both produced and fetched")
        return fig
    for consumer, group in matched.groupby("consumer", dropna=False):
        ax.scatter(group["produced"], group["delay_ms"], label=str(consumer), s=24)
    ax.set_ylabel("ms from Produce request to Fetch response")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    _time_axis(ax)
    return fig
