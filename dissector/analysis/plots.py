"""Matplotlib figures of the analyses. Each function returns its `Figure`, built without
pyplot (no GUI backend, nothing global): show it in Jupyter by leaving it as a cell's value,
save it with `fig.savefig(path)`."""

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from .errors import errors
from .groups import group_generations, group_timeline
from .lag import lag
from .latency import latency
from .throughput import VOLUME, throughput

SIZE = (9, 4)
#: The measures of a `throughput` row (what is not a measure is its group).
ALL_VOLUME = {"window", *VOLUME, "bytes_per_s", "records_per_s"}


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


def palette(n):
    """`n` colours, no two alike: the ten of tab10 order, their light shades, then tab20b and
    tab20c (60 in all), then hues evenly spaced."""
    tab20 = colormaps["tab20"].colors
    base = [*tab20[0::2], *tab20[1::2], *colormaps["tab20b"].colors, *colormaps["tab20c"].colors]
    if n <= len(base):
        return base[:n]
    hues = colormaps["hsv"](np.linspace(0, 1, n - len(base), endpoint=False))
    return [*base, *(tuple(c[:3]) for c in hues)]


def _windows(times, freq):
    """Every window from the first to the last of `times`, those without data included."""
    return pd.date_range(times.min(), times.max(), freq=freq)


def _over(windows, group, column):
    """A series' values over every window: NaN (a gap in the line) where it has none."""
    values = group.set_index("window")[column]
    return pd.to_numeric(values, errors="coerce").astype(float).reindex(windows).to_numpy()


def _scale(ax, values):
    """A log y axis when the positive values span more than three decades (symlog when
    there are zeros as well, which a log axis cannot show)."""
    values = pd.to_numeric(pd.Series(values), errors="coerce").astype(float).dropna()
    positive = values[values > 0]
    if positive.empty or positive.max() / positive.min() <= 1000:
        return
    if (values <= 0).any():
        ax.set_yscale("symlog", linthresh=positive.min())
    else:
        ax.set_yscale("log")


def _unit(value, peak):
    """(divisor, label) for a column: bytes in B, KB, MB or GB (of 1000) as its peak needs,
    per second for the `_per_s` columns."""
    rate = "/s" if value.endswith("_per_s") else ""
    if "bytes" not in value:
        return 1, value.removesuffix("_per_s").replace("_", " ") + rate
    for size, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if pd.notna(peak) and peak >= size:
            return size, f"{prefix}B{rate}"
    return 1, f"B{rate}"


def _label(key):
    """A legend label of a group key, the parts of a tuple joined by spaces."""
    return " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))


def latency_over_time(pairs, freq="1s", stat="p95_ms", apis=None):
    """One line per API: the latency percentile `stat` (p50_ms, p95_ms, p99_ms, max_ms) per
    time window, broken where a window has no request of that API."""
    fig, ax = _figure(f"latency {stat.removesuffix('_ms')} per {freq}")
    data = latency(pairs, by="api", freq=freq)
    if apis is not None:
        data = data[data["api_name"].isin(apis)]
    if data.empty:
        _empty(ax, "answered requests")
        return fig
    windows = _windows(data["window"], freq)
    groups = data.groupby("api_name")
    for colour, (api, group) in zip(palette(groups.ngroups), groups, strict=True):
        ax.plot(windows, _over(windows, group, stat), marker=".", color=colour, label=api)
    _scale(ax, data[stat])
    ax.set_ylabel(f"{stat.removesuffix('_ms')} latency (ms)")
    ax.legend(fontsize="small", ncols=2)
    _time_axis(ax)
    return fig


def latency_heatmap(pairs, freq="1s", stat="p95_ms"):
    """APIs by time window, coloured by the latency percentile `stat` (log scale); a window
    without requests of an API is left blank."""
    fig, ax = _figure(f"latency {stat.removesuffix('_ms')} per API and {freq}")
    data = latency(pairs, by="api", freq=freq)
    if data.empty:
        _empty(ax, "answered requests")
        return fig
    grid = data.pivot(index="api_name", columns="window", values=stat)
    grid = grid.reindex(columns=_windows(data["window"], freq))
    shown = grid.to_numpy(dtype=float).clip(min=1e-3)
    image = ax.imshow(
        np.ma.masked_invalid(shown),
        aspect="auto",
        cmap="viridis",
        interpolation="nearest",
        norm=LogNorm(),
    )
    ax.set_yticks(range(len(grid.index)), grid.index)
    step = max(1, len(grid.columns) // 8)
    ax.set_xticks(
        range(0, len(grid.columns), step), [t.strftime("%H:%M:%S") for t in grid.columns[::step]]
    )
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(f"{stat.removesuffix('_ms')} latency (ms)")
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_xlabel("window start (UTC)")
    return fig


def throughput_over_time(partitions, freq="1s", by="topic", value="bytes_per_s"):
    """One line per API and topic (or `by`): bytes/s (or `value`, e.g. records_per_s) per
    window, in B/s, KB/s, MB/s or GB/s as the peak needs; broken where a window carried
    nothing."""
    fig, ax = _figure(f"{value.replace('_per_s', '')} per second, per {freq}")
    data = throughput(partitions, freq=freq, by=by)
    if data.empty or value not in data:
        _empty(ax, "record data")
        return fig
    keys = ["api_name", *[c for c in data.columns[2:] if c not in ALL_VOLUME]]
    # one window more at the end: a step as wide as its window, the last one too
    windows = _windows(data["window"], freq)
    windows = windows.append(
        pd.DatetimeIndex([windows[-1] + pd.tseries.frequencies.to_offset(freq)])
    )
    size, unit = _unit(value, pd.to_numeric(data[value], errors="coerce").max())
    groups = data.groupby(keys, dropna=False)
    for colour, (key, group) in zip(palette(groups.ngroups), groups, strict=True):
        ax.plot(
            windows,
            _over(windows, group, value) / size,
            marker="o",
            drawstyle="steps-post",
            color=colour,
            label=_label(key),
        )
    _scale(ax, data[value])
    ax.set_ylabel(unit)
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
    groups = data.groupby("api_name", dropna=False)
    for colour, (api, group) in zip(palette(groups.ngroups), groups, strict=True):
        ax.scatter(
            group["time"], group["what"].map(names.index), color=colour, label=_label(api), s=24
        )
    ax.set_yticks(range(len(names)), names)
    ax.legend(fontsize="small")
    _time_axis(ax)
    return fig


def group_gantt(pairs, group_id=None):
    """Members per generation as a Gantt chart: one row per member (client id), one bar per
    generation it was in, from the end of its JoinGroup to the next generation (or its
    LeaveGroup, or its last group exchange); the rebalances are shaded. A round that never
    synced is shaded red, its members' bars hatched and marked `failed`, up to the start of
    the round after it."""
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
    # the next round of the same group: where a member's bar ends
    after = gens.groupby("group_id", sort=False)[["started", "joined"]].shift(-1)
    for i, gen in enumerate(gens.itertuples(index=False)):
        nxt_start, nxt = after.iloc[i]["started"], after.iloc[i]["joined"]
        # a round that never synced: its members from the end of its JoinGroups until the
        # group started over (or their last answer), hatched and marked failed
        failed = gen.outcome == "failed"
        settled = gen.synced if pd.notna(gen.synced) else nxt_start if failed else gen.joined
        if pd.notna(gen.started) and pd.notna(settled):
            shade = "tab:red" if failed else "grey"
            ax.axvspan(gen.started, settled, color=shade, alpha=0.15, lw=0)
        for member, client in gen.member_client_ids.items():
            if client not in clients:
                continue
            if failed:
                start, ends = gen.joined, (nxt_start if pd.notna(nxt_start) else last.get(client),)
            else:
                start, ends = gen.joined, (nxt, left.get(client), last.get(client))
            ends = [t for t in ends if pd.notna(t)]
            if pd.isna(start) or not ends or min(ends) <= start:
                continue
            end = min(ends)
            y = clients.index(client)
            ax.barh(
                y,
                end - start,
                left=start,
                height=0.6,
                color="white" if failed else colours[i],
                edgecolor="tab:red" if failed else "black",
                hatch="//" if failed else None,
                linewidth=0.4,
            )
            role = "*" if member == gen.leader else ""
            ax.text(
                start + (end - start) / 2,
                y,
                f"g{gen.generation_id}{role}" + (" failed" if failed else ""),
                ha="center",
                va="center",
                fontsize="small",
            )
    ax.set_yticks(range(len(clients)), clients)
    ax.invert_yaxis()
    _time_axis(ax, "time (UTC); * leader, shaded: rebalancing, hatched: never synced")
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
    groups = data.groupby(keys, dropna=False)
    for colour, (key, group) in zip(palette(groups.ngroups), groups, strict=True):
        lags = group["lag"].astype(float)
        ax.step(group["time"], lags, where="post", marker=".", color=colour, label=_label(key))
    _scale(ax, data["lag"])
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
    groups = matched.groupby("consumer", dropna=False)
    for colour, (consumer, group) in zip(palette(groups.ngroups), groups, strict=True):
        ax.scatter(group["produced"], group["delay_ms"], color=colour, label=str(consumer), s=24)
    ax.set_ylabel("ms from Produce request to Fetch response")
    _scale(ax, matched["delay_ms"])
    if ax.get_yscale() == "linear":
        ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    _time_axis(ax)
    return fig
