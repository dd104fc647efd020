"""Property tests in the Gemini dialect: random `contents` histories (strategies.render_gemini:
the plans of test_properties.py, calls with ids, results shuffled, missing, duplicated or
misplaced, Unicode of every kind, outputs up to ~200 KB), replayed as an agent loop with one
compactor at windows from far above the history to far below it, with the extractive
summarizer or a good model reply. After every compact() call:
  - the input is not mutated;
  - the view passes check_pairs in the Gemini dialect;
  - turns alternate: the histories alternate (as generateContent demands), so no two turns of
    one side may stand next to each other in a view;
  - the task opens the view, as the caller's object or a copy whose parts start with its own;
  - at most one checkpoint, in a user turn; a message the view did not change is the caller's
    object; on a fresh compactor at tier none the view is repair_pairs(history) object for
    object;
  - the bound (compaction_support.check_bound).
"""


import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxkeel
from compaction_support import check_bound, check_view_objects, prop_settings, replay_in_dialect
from strategies import good_replies, plans, render_gemini

MARKER = ctxkeel._ext.CHECKPOINT_MARKER
RATIOS = [0.3, 0.68, 0.73, 0.83, 0.97, 1.3, 3.0, 20.0]

pytestmark = pytest.mark.no_leak_check


def side(turn):
    return "model" if turn.get("role") == "model" else "user"


def is_checkpoint_part(part):
    return isinstance(part.get("text"), str) and part["text"].startswith(MARKER)


@st.composite
def scenarios(draw):
    plan = draw(plans())
    messages, info = render_gemini(plan)
    tokens = ctxkeel.estimate_tokens(ctxkeel.repair_pairs(messages, format="gemini"))
    ratio = draw(st.sampled_from(RATIOS))
    reply = draw(st.one_of(st.none(), good_replies()))
    options = {
        "context_window": max(1, int(tokens / ratio)),
        "keep_tail": draw(st.sampled_from([1, 2, 6])),
        "offload_threshold": draw(st.sampled_from([4000, 300])),
        "format": draw(st.sampled_from(["gemini", "auto"])),
    }
    ends = info["ends"]
    points = sorted(set(draw(st.lists(st.sampled_from(ends), max_size=3)))) if ends else []
    if not points or points[-1] != len(messages):
        points.append(len(messages))
    return messages, options, reply, points


def check_view(compactor, messages, result, fresh):
    view = result.messages
    assert ctxkeel.check_pairs(view, format="gemini") == [], "the view breaks tool-call pairs"
    for j in range(1, len(view)):
        assert side(view[j]) != side(view[j - 1]), (
            "turns %d and %d of the view are both %s turns" % (j - 1, j, side(view[j])))
    task = messages[0]
    assert view[0] is task or view[0]["parts"][:len(task["parts"])] == task["parts"], (
        "the view does not open with the task")
    checkpoints = [(j, p) for j, m in enumerate(view) for p in m["parts"] if is_checkpoint_part(p)]
    assert len(checkpoints) <= 1, "%d checkpoints" % len(checkpoints)
    for j, _ in checkpoints:
        assert side(view[j]) == "user"
    check_view_objects(messages, view, "gemini", result.tier == "none" and fresh)
    assert result.tokens_after <= result.tokens_before
    check_bound(compactor, result)


@prop_settings(150)
@given(scenarios())
def test_gemini_views_alternate_and_pair(scenario):
    messages, options, reply, points = scenario
    replay_in_dialect(messages, options, reply, points, "gemini", [0], check_view)
