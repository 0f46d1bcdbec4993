"""Result files written whole or not at all: a benchmark or sweep stopped at its time limit (SIGINT) while
writing leaves the previous file as it was, never a truncated one, and no temporary file behind."""
import json
import os


def save_json(data, path: str, indent: int | None = None) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file renamed over it (removed if the write
    stops part way); the parent folder is created."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=indent)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
