"""ctxkeel.replay: a recorded transcript fed to a Compactor as an agent loop would feed it.

The loop, the rows, the totals and the chart are the C core's (``ck_replay_run``), the same
that ``ctxkeel replay`` prints; this module only holds them and shows them in a notebook.
"""

import html
import json

from . import _ext
from ._compactor import Compactor
from ._ext import CHECKPOINT_MARKER

__all__ = ["Replay", "replay"]


def replay(messages, context_window, *, summarize=None, title=None, **compactor_options):
    """Replays ``messages`` through a new ``Compactor(context_window, **compactor_options)``:
    before every assistant message (a model call) the history up to it, and once after the
    last message. Returns a ``Replay`` with one row per model call.

    ``messages`` is a message list, an object with ``"messages"`` (as the corpus files and
    Anthropic requests have), or their JSON text. ``summarize`` is None (the built-in
    extractive summarizer: no model, no network) or an ``HttpSummarizer``. ``title`` heads the
    chart. The compactor writes its evidence store and audit log under ``store_dir`` as
    ``compact`` does (default ".ctxkeel"). ``on_compaction`` and ``summarize_timeout`` are not
    taken: every record is in the rows.
    """
    for name in ("on_compaction", "summarize_timeout"):
        if name in compactor_options:
            raise TypeError("ctxkeel: replay() does not take %s" % name)
    compactor = Compactor(context_window, **compactor_options)
    text = messages if isinstance(messages, str) else json.dumps(messages, ensure_ascii=False)
    rows, totals, svg = _ext._replay(compactor._core, text, summarize, title)
    return Replay(rows, totals, svg, int(context_window), compactor.session_id)


class Replay:
    """What ``replay`` returns.

    ``rows``: one dict per model call, in order, with the keys ``call``, ``messages``,
    ``view_messages``, ``history_tokens`` (the whole history: what would be sent without
    ctxkeel), ``tokens_before``, ``tokens_after`` (the view sent), ``ratio_before``,
    ``ratio_after`` (over the window), ``tier``, ``compaction`` (its number, 0 for none),
    ``summarized``, ``offloaded``, ``summary_calls``, ``summary_tokens``, ``fallback``,
    ``action`` (the CLI's action column), ``checkpoint`` (the text of a new checkpoint, else
    None), ``placeholder`` (the first output this call offloaded, as the view shows it) and
    ``record`` (the audit record, or None). ``totals``: sums over the rows (``tokens_sent``,
    ``tokens_without``, ``peak_ratio``, ``peak_ratio_without``, ``per_tier``...).
    ``pandas.DataFrame(replay.rows)`` makes a table of it.
    """

    __slots__ = ("rows", "totals", "context_window", "session_id", "_svg")

    def __init__(self, rows, totals, svg, context_window, session_id):
        self.rows = rows
        self.totals = totals
        self.context_window = context_window
        self.session_id = session_id
        self._svg = svg

    def __len__(self):
        return len(self.rows)

    def __repr__(self):
        t = self.totals
        return ("Replay(calls=%d, compactions=%d, peak_ratio=%.2f, tokens_sent=%d, "
                "tokens_without=%d, context_window=%d)"
                % (t["calls"], t["compactions"], t["peak_ratio"], t["tokens_sent"],
                   t["tokens_without"], self.context_window))

    def to_svg(self):
        """The chart as SVG text: context use per model call, the tier bands, a marker at
        each compaction, the whole history for comparison."""
        return self._svg

    def _repr_html_(self):
        t = self.totals
        first = next((r for r in self.rows if r["checkpoint"]), None)
        parts = [self._svg, "<p>", _cost_line(t, self.context_window), "</p>"]
        if first is not None:
            parts.append(_details("the first checkpoint (call %d)" % first["call"],
                                  first["checkpoint"]))
        parts.append(_details("%d rows" % len(self.rows), _rows_table(self.rows), raw=True))
        return "".join(parts)


def _cost_line(t, window):
    return html.escape(
        "%d model calls, %d compactions. Without ctxkeel: %d tokens sent, peak %.0f%% of the "
        "%d-token window (%d calls over it). With ctxkeel: %d tokens sent, peak %.0f%%."
        % (t["calls"], t["compactions"], t["tokens_without"], 100 * t["peak_ratio_without"],
           window, t["over_window_without"], t["tokens_sent"], 100 * t["peak_ratio"]))


def _details(summary, body, raw=False):
    inner = body if raw else "<pre style=\"white-space:pre-wrap\">%s</pre>" % html.escape(body)
    return "<details><summary>%s</summary>%s</details>" % (html.escape(summary), inner)


_COLUMNS = ("call", "messages", "history_tokens", "tokens_before", "tokens_after",
            "ratio_after", "tier", "action")


def _rows_table(rows):
    head = "".join("<th>%s</th>" % c for c in _COLUMNS)
    body = "".join(
        "<tr>%s</tr>" % "".join(
            "<td>%s</td>" % html.escape("%.2f" % r[c] if isinstance(r[c], float) else str(r[c]))
            for c in _COLUMNS)
        for r in rows)
    return "<table><tr>%s</tr>%s</table>" % (head, body)


def _checkpoint_in(messages):
    """The text of the checkpoint message in a view, or None."""
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts = [content]
        elif isinstance(content, list):
            texts = [b.get("text") for b in content if isinstance(b, dict)]
        else:
            texts = []
        for text in texts:
            if isinstance(text, str) and text.startswith(CHECKPOINT_MARKER):
                return text
    return None


def compaction_html(result):
    """CompactionResult._repr_html_: the tier, the tokens before and after (against the
    window where the result or its record says it), the checkpoint and the record without
    its internal "state", both collapsible."""
    record = result.record or {}
    ratio_before = getattr(result, "ratio_before", None) or record.get("ratio_before")
    ratio_after = getattr(result, "ratio_after", None) or record.get("ratio_after")
    size = "%d &rarr; %d tokens" % (result.tokens_before, result.tokens_after)
    if ratio_before is not None and ratio_after is not None:
        size += " (%.0f%% &rarr; %.0f%% of the window)" % (100 * ratio_before, 100 * ratio_after)
    parts = ["<p><b>CompactionResult</b>: tier <b>%s</b>, %s, %d messages</p>"
             % (html.escape(str(result.tier)), size, len(result.messages))]
    checkpoint = _checkpoint_in(result.messages)
    if checkpoint is not None:
        parts.append(_details("checkpoint (%d characters)" % len(checkpoint), checkpoint))
    if result.record is not None:
        shown = {k: v for k, v in result.record.items() if k != "state"}
        parts.append(_details("record", json.dumps(shown, indent=2, ensure_ascii=False)))
    return "".join(parts)
