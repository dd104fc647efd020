"""Property tests in the Responses, AI SDK and LangChain dialects (strategies.render_dialect:
the plans of test_properties.py, results shuffled, missing, duplicated or misplaced, Unicode of
every kind, outputs up to ~200 KB), replayed as an agent loop with one compactor at windows
from far above the history to far below it, with the extractive summarizer or a good model
reply. After every compact() call:
  - the input is not mutated;
  - the view passes check_pairs in its dialect;
  - the system messages and the task are in the view as the caller's objects;
  - at most one checkpoint; a message the view did not change is the caller's object; on a
    fresh compactor at tier none the view is repair_pairs(history) object for object;
  - the bound (compaction_support.check_bound).
(The Gemini dialect has its own file, test_gemini_properties.py: its turns must alternate.)
"""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxkeel
from compaction_support import check_bound, check_view_objects, prop_settings, replay_in_dialect
from strategies import good_replies, plans, render_dialect

# '"[Context Compaction]': the start of a JSON string that begins with the marker.
MARKER = json.dumps(ctxkeel._ext.CHECKPOINT_MARKER)[:-1]
RATIOS = [0.3, 0.68, 0.73, 0.83, 0.97, 1.3, 3.0, 20.0]
DIALECTS = ["responses", "ai-sdk", "langchain"]

pytestmark = pytest.mark.no_leak_check


@st.composite
def scenarios(draw):
    dialect = draw(st.sampled_from(DIALECTS))
    messages, info = render_dialect(draw(plans()), dialect)
    tokens = ctxkeel.estimate_tokens(ctxkeel.repair_pairs(messages, format=dialect))
    options = {
        "context_window": max(1, int(tokens / draw(st.sampled_from(RATIOS)))),
        "keep_tail": draw(st.sampled_from([1, 2, 6])),
        "offload_threshold": draw(st.sampled_from([4000, 300])),
        "format": draw(st.sampled_from([dialect, "auto"])),
    }
    ends = info["ends"]
    points = sorted(set(draw(st.lists(st.sampled_from(ends), max_size=3)))) if ends else []
    if not points or points[-1] != len(messages):
        points.append(len(messages))
    return dialect, messages, info, options, draw(st.one_of(st.none(), good_replies())), points


def check_view(compactor, dialect, messages, info, result, fresh):
    view = result.messages
    assert ctxkeel.check_pairs(view, format=dialect) == [], "the view breaks tool-call pairs"
    in_view = {id(m) for m in view}
    for i in info["pinned"]:
        if i < len(messages):
            assert id(messages[i]) in in_view, "pinned message %d is not in the view" % i
    checkpoints = [m for m in view if MARKER in json.dumps(m, ensure_ascii=False)]
    assert len(checkpoints) <= 1, "%d checkpoints" % len(checkpoints)
    check_view_objects(messages, view, dialect, result.tier == "none" and fresh)
    assert result.tokens_after <= result.tokens_before
    check_bound(compactor, result)


@prop_settings(150)
@given(scenarios())
def test_views_pair_and_keep_the_pinned_messages(scenario):
    dialect, messages, info, options, reply, points = scenario
    replay_in_dialect(messages, options, reply, points, dialect, info["pinned"],
                      lambda compactor, prefix, result, fresh:
                      check_view(compactor, dialect, prefix, info, result, fresh))
