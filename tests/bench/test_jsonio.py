"""Result files are written whole or not at all (``tritium.bench.jsonio``)."""
import json

import pytest

from tritium.bench import jsonio
from tritium.tune import attention as tune


@pytest.mark.parametrize("save", [lambda d, p: jsonio.save_json(d, p, indent=1), tune.save_json],
                         ids=["bench", "tune"])
def test_a_write_stopped_part_way_leaves_the_old_file(tmp_path, monkeypatch, save):
    """A write stopped part way (a time limit's SIGINT during json.dump) leaves the file as it was and no
    temporary file behind; a write that finishes replaces it; a missing folder is created."""
    path = str(tmp_path / "out" / "result.json")
    save({"records": [1, 2]}, path)
    real_dump = json.dump

    def interrupted(data, f, **kw):
        f.write('{"records": [')
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save({"records": [1, 2, 3]}, path)
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == {"records": [1, 2]}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["result.json"]
    monkeypatch.setattr(json, "dump", real_dump)
    save({"records": [3]}, path)
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == {"records": [3]}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["result.json"]


def test_a_value_json_cannot_write_raises_and_leaves_nothing(tmp_path):
    path = str(tmp_path / "result.json")
    with pytest.raises(TypeError):
        jsonio.save_json({"x": object()}, path)
    assert list(tmp_path.iterdir()) == []
