"""examples/replay.ipynb runs from top to bottom (nbclient, the kernel of this venv) and shows
the chart and a checkpoint. Its outputs are not committed; this run makes them."""

import os

import pytest

nbformat = pytest.importorskip("nbformat", reason="make py-test installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="make py-test installs nbclient")

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "corpus")


def test_replay_notebook_runs(monkeypatch):
    if not os.path.isdir(CORPUS):
        pytest.skip("no corpus at ../shared/corpus")
    path = os.path.join(EXAMPLES, "replay.ipynb")
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook without outputs"
    monkeypatch.setenv("CK_CORPUS", os.path.abspath(CORPUS))  # the kernel inherits it
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": EXAMPLES}}).execute()
    html = [o["data"]["text/html"] for c in nb.cells for o in c.get("outputs", [])
            if "text/html" in o.get("data", {})]
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert any(h.startswith("<svg") and "compaction" in h for h in html)  # the replay's chart
    assert "[Context Compaction]" in text  # the printed checkpoint
    assert any("<summary>record</summary>" in h for h in html)  # the CompactionResult
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
