"""Fit decision trees to a paged-attention sweep and export them as plain Python (scikit-learn, tune time only).

For each kernel family, every swept workload gives a vector: for each candidate (the knob sets and
"hand"), log(time / best time of the workload), capped at log(4) (a candidate that failed counts as
the cap). A multi-output regression tree over the workload features (``tritium.attention.config.features``)
predicts that vector; each leaf answers the candidate with the smallest mean among those no more than 3%
slower than the hand rules on any of its training workloads (the hand rules qualify), i.e. the tree minimises
the mean log slowdown of its picks. Its depth is chosen by 5-fold cross-validation on the training
workloads. A fifth of the workloads (drawn with a fixed seed, from all but the ones named as always
trained on: the benchmark's anchor shapes) is held out and never seen by the fit;
the tree's pick on each of them is compared with the best swept candidate and with the hand rules.
"""

import hashlib
import itertools
import json
import math
import os
import random

import numpy as np

from tritium.attention.config import DECODE, PREFILL, next_pow2

FAMILIES = (DECODE, PREFILL)
FEATURES = ("num_seqs", "num_tokens", "max_seqlen_q", "max_seqlen_k", "head_dim", "group", "num_kv_heads",
            "block_size", "kv_bits", "programs")
HAND = "hand"
CAP = 4.0  # slowdown counted for a failed candidate (and the most any one counts)
HOLDOUT = 0.2
DEPTHS = (2, 3, 4, 5, 6, 8)
TREE_DIR = os.path.join(os.path.dirname(__file__), "..", "attention", "tuned")


def _key_to_knobs(key: str):
    return HAND if key == HAND else tuple(int(x) for x in key.split("-"))


def split_holdout(records: list[dict], seed: int = 0, train_only=frozenset()) -> tuple[list[dict], list[dict]]:
    """(train, held-out): a fixed fifth of each family's workloads, by name, held out, drawn from the
    workloads not named in ``train_only`` (the benchmark's anchor shapes: always trained on)."""
    train, held = [], []
    for fam in FAMILIES:
        names = sorted(r["name"] for r in records if r["family"] == fam)
        pool = [n for n in names if n not in train_only]
        rng = random.Random(f"{seed}-{fam}")
        held_names = set(rng.sample(pool, min(len(pool), round(HOLDOUT * len(names))))) if len(names) >= 5 else set()
        for r in records:
            if r["family"] == fam:
                (held if r["name"] in held_names else train).append(r)
    return train, held


def _matrix(records: list[dict], candidates: list[str]):
    x = np.array([[r["features"][f] for f in FEATURES] for r in records], dtype=np.float64)
    y = np.empty((len(records), len(candidates)))
    for i, r in enumerate(records):
        times = r["times_ms"]
        best = min(t for t in times.values() if t is not None)
        for j, c in enumerate(candidates):
            t = times.get(c)
            y[i, j] = math.log(CAP) if t is None else math.log(min(CAP, t / best))
    return x, y


SAFE = math.log(1.03)  # a leaf's pick is never more than 3% slower than the hand rules on its workloads


def _fit(x, y, depth: int, hand: int | None):
    """A regression tree with ``leaf_pick`` set: leaf id -> the index of the candidate it answers.

    Each leaf answers, among the candidates that are at most 3% slower than the hand rules (index
    ``hand``) on every training workload of the leaf, the one with the smallest mean log slowdown (the
    hand rules qualify by definition). Without a hand column, the smallest mean."""
    from sklearn.tree import DecisionTreeRegressor

    tree = DecisionTreeRegressor(max_depth=depth, min_samples_leaf=2, random_state=0).fit(x, y)
    leaves = tree.apply(x)
    tree.leaf_pick = {}
    for leaf in np.unique(leaves):
        rows = y[leaves == leaf]
        mean = rows.mean(axis=0)
        if hand is not None:
            unsafe = (rows - rows[:, [hand]]).max(axis=0) > SAFE
            mean = np.where(unsafe, np.inf, mean)
        tree.leaf_pick[int(leaf)] = int(np.argmin(mean))
    return tree


def _picks(tree, x):
    return np.array([tree.leaf_pick[int(leaf)] for leaf in tree.apply(x)])


def _mean_regret(tree, x, y) -> float:
    return float(y[np.arange(len(y)), _picks(tree, x)].mean())


def fit_family(records: list[dict], candidates: list[str]):
    """(tree or None, depth, cross-validated mean log slowdown of the tree, of the hand rules) for one
    family's training records; depth by 5-fold cross-validation. None: the tree does not beat the
    hand rules by 1% (geometric mean) in cross-validation, and the family keeps them."""
    x, y = _matrix(records, candidates)
    hand_col = candidates.index(HAND) if HAND in candidates else None
    hand = float(y[:, hand_col].mean()) if hand_col is not None else math.inf
    if len(records) < 10:
        return None, 0, math.nan, hand
    folds = np.arange(len(records)) % 5
    best = None
    for depth in DEPTHS:
        regret = float(np.mean([_mean_regret(_fit(x[folds != k], y[folds != k], depth, hand_col), x[folds == k],
                                             y[folds == k])
                                for k in range(5)]))
        if best is None or regret < best[0] - 1e-9:
            best = (regret, depth)
    if best[0] > hand - math.log(1.01):
        return None, best[1], best[0], hand
    return _fit(x, y, best[1], hand_col), best[1], best[0], hand


def tree_source(tree, candidates: list[str], name: str) -> str:
    """The fitted tree as a Python function ``name(f)`` of the feature dict; sibling leaves that pick
    the same candidate are merged."""
    t = tree.tree_

    def pick(node):
        if t.children_left[node] < 0:
            return _key_to_knobs(candidates[tree.leaf_pick[node]])
        left, right = pick(t.children_left[node]), pick(t.children_right[node])
        return left if left == right and not isinstance(left, list) else [node, left, right]

    def emit(node_or_leaf, indent):
        pad = "    " * indent
        if not isinstance(node_or_leaf, list):
            return [f"{pad}return {node_or_leaf!r}"]
        node, left, right = node_or_leaf
        feature = FEATURES[t.feature[node]]
        threshold = float(t.threshold[node])
        # Features are integers: x <= 2047.5 is x <= 2047.
        lines = [f"{pad}if f[{feature!r}] <= {math.floor(threshold)}:"]
        lines += emit(left, indent + 1)
        lines += [f"{pad}else:"]
        lines += emit(right, indent + 1)
        return lines

    return "\n".join([f"def {name}(f):"] + emit(pick(0), 1)) + "\n"


def unfit_source(unfit: frozenset) -> str:
    """``UNFIT`` (``unfit_keys``), which ``select_attention_config`` never takes from the tree."""
    lines = ["# Configurations that ran out of resources in the sweep and every one that needs at least as much",
             "# (unfit_keys), as tritium.attention.config.resource_key: (block_m, tile_n, num_warps, num_stages,",
             "# padded head_dim, KV bits). The tree's answer is not taken for these; the hand rules run instead.",
             "UNFIT = frozenset({"]
    lines += [f"    {key!r}," for key in sorted(unfit)]
    return "\n".join(lines + ["})\n"])


def predict(tree, candidates, features: dict):
    row = np.array([[features[f] for f in FEATURES]], dtype=np.float64)
    return _key_to_knobs(candidates[_picks(tree, row)[0]])


def _resource_key(record: dict, key: str) -> tuple:
    """``tritium.attention.config.resource_key`` of candidate ``key``'s configuration in a sweep record."""
    block_m, _, tile_n, _, num_warps, num_stages = record["configs"][key][:6]
    f = record["features"]
    return (block_m, tile_n, num_warps, num_stages, next_pow2(f["head_dim"]), f["kv_bits"])


def unfit_keys(records: list[dict]) -> frozenset:
    """Resource keys of the configurations that ran out of resources (shared memory, registers) in the
    sweep, and of every configuration that needs at least as much: the same warps, and a Q block, key
    tile, stage count, padded head_dim and KV width each at least as large as a failed one's (over the
    values the sweep's configurations take). A tree's answer whose configuration has one of these keys
    is not taken (the hand rules run instead)."""
    failed = {_resource_key(r, key) for r in records for key, error in r.get("errors", {}).items()
              if error.startswith("OutOfResources") and key in r.get("configs", {})}
    seen = [_resource_key(r, key) for r in records for key in r.get("configs", {})]
    values = [sorted({k[i] for k in seen} | {k[i] for k in failed}) for i in range(6)]
    grows = (0, 1, 3, 4, 5)  # block_m, tile_n, num_stages, head_dim, KV bits; num_warps (2) must match
    closure = set(failed)
    for f in failed:
        for key in itertools.product(*([v for v in values[i] if v >= f[i]] if i in grows else [f[i]]
                                       for i in range(6))):
            closure.add(key)
    return frozenset(closure)


def validate(records: list[dict], choose, unfit=frozenset()) -> list[dict]:
    """Per held-out workload: the tree's pick, its time vs the best swept and vs the hand rules. A pick
    whose resource key is in ``unfit`` counts as the hand rules, as ``select_attention_config`` does."""
    rows = []
    for r in records:
        times = {k: v for k, v in r["times_ms"].items() if v is not None}
        best_key = min(times, key=times.get)
        knobs = choose(r["family"], r["features"])
        key = HAND if knobs == HAND else "-".join(map(str, knobs))
        if key != HAND and key in r.get("configs", {}) and _resource_key(r, key) in unfit:
            key = HAND
        t = r["times_ms"].get(key)
        rows.append(dict(name=r["name"], family=r["family"], pick=key, best=best_key,
                         vs_best=(t / times[best_key]) if t else math.inf,
                         vs_hand=(t / times[HAND]) if t and HAND in times else math.inf))
    return rows


def summary(rows: list[dict]) -> dict:
    out = {}
    for fam in FAMILIES + ("all",):
        sel = [r for r in rows if fam in ("all", r["family"])]
        if sel:
            out[fam] = dict(workloads=len(sel), within_5pct_of_best=sum(r["vs_best"] <= 1.05 for r in sel) / len(sel),
                            worst_vs_best=max(r["vs_best"] for r in sel), worst_vs_hand=max(r["vs_hand"] for r in sel),
                            geomean_vs_hand=math.exp(sum(math.log(r["vs_hand"]) for r in sel) / len(sel)))
    return out


def print_validation(rows: list[dict], stats: dict) -> None:
    print(f"\nheld-out validation ({len(rows)} workloads never seen by the fit)")
    print(f"{'workload':58s} {'tree pick':>12s} {'best':>12s} {'vs best':>8s} {'vs hand':>8s}")
    for r in sorted(rows, key=lambda r: (r["family"], r["name"])):
        print(f"{r['name']:58s} {r['pick']:>12s} {r['best']:>12s} {r['vs_best']:8.3f} {r['vs_hand']:8.3f}")
    print(f"\n{'family':8s} {'n':>4s} {'<=5% of best':>13s} {'worst vs best':>14s} {'worst vs hand':>14s} "
          f"{'geomean vs hand':>16s}")
    for fam, s in stats.items():
        print(f"{fam:8s} {s['workloads']:4d} {s['within_5pct_of_best']:13.1%} {s['worst_vs_best']:14.3f} "
              f"{s['worst_vs_hand']:14.3f} {s['geomean_vs_hand']:16.3f}")


def module_name(gpu: str) -> str:
    """"NVIDIA H100 80GB HBM3" -> "nvidia_h100" (tritium.attention.tuned.TREES)."""
    return "_".join(gpu.split()[:2]).lower().replace("-", "_")


def fit_and_export(path: str, tree_dir: str | None = None, seed: int = 0, train_only=frozenset()) -> dict:
    """Fit both families' trees from the sweep JSON at ``path``, print the held-out table, write
    ``<tree_dir>/<gpu module>.py``; returns the validation summary. ``train_only``: names of workloads
    never held out (see ``split_holdout``)."""
    with open(path, "rb") as f:
        raw = f.read()
    data = json.loads(raw)
    records = [r for r in data["records"] if any(v is not None for v in r["times_ms"].values())]
    train, held = split_holdout(records, seed, train_only)
    anchors = sum(r["name"] in train_only for r in records)
    fitted, sources, depths, cv = {}, [], {}, {}
    for fam in FAMILIES:
        fam_train = [r for r in train if r["family"] == fam]
        candidates = sorted({k for r in fam_train for k in r["times_ms"]})
        tree, depth, tree_cv, hand_cv = fit_family(fam_train, candidates) if fam_train else (None, 0, math.nan, 0.0)
        cv[fam] = dict(tree=round(math.exp(tree_cv), 4), hand=round(math.exp(hand_cv), 4))
        if tree is None:
            sources.append(f"def {fam}(f):\n    # Cross-validated, no tree beat the hand rules by 1%: mean slowdown vs the best\n"
                           f"    # {cv[fam]['tree']}x (tree) vs {cv[fam]['hand']}x (hand rules).\n    return 'hand'\n")
            continue
        fitted[fam] = (tree, candidates)
        depths[fam] = depth
        sources.append(tree_source(tree, candidates, fam))

    def choose(fam, features):
        if fam not in fitted:
            return HAND
        return predict(*fitted[fam], features)

    unfit = unfit_keys(records)
    rows = validate(held, choose, unfit)
    stats = summary(rows)
    print_validation(rows, stats)
    digest = hashlib.sha256(raw).hexdigest()[:16]
    counts = {fam: sum(r["family"] == fam for r in records) for fam in FAMILIES}
    lines = [f"{fam}: {s['workloads']} held out, {s['within_5pct_of_best']:.0%} within 5% of the best swept, "
             f"worst {s['worst_vs_best']:.3f}x the best and {s['worst_vs_hand']:.3f}x the hand rules"
             for fam, s in stats.items() if fam != "all"]
    header = (f'"""Paged-attention kernel knobs for {data["gpu"]} ({data["sms"]} SMs): generated, do not edit.\n\n'
              f"Fitted by ``python -m tritium.tune attention {'' if train_only else '--hold-out-anchors '}"
              f"--fit {os.path.relpath(path)}``\n"
              f"(sha256 {digest}; {counts[DECODE]} decode-family and {counts[PREFILL]} prefill-family workloads,\n"
              f"swept {data.get('header', {}).get('date', '?')}; tree depths {depths};\n"
              f"cross-validated geometric-mean slowdown vs the best swept, tree vs hand rules: {cv}).\n"
              + (f"The benchmark's {anchors} anchor workloads are always in the training set.\n" if anchors else "")
              + "Held-out validation (workloads the fit never saw):\n"
              + "".join(f"    {line}\n" for line in lines)
              + '"""\n\n')
    src = header + unfit_source(unfit) + "\n\n" + "\n\n".join(sources)
    out_dir = tree_dir or TREE_DIR
    os.makedirs(out_dir, exist_ok=True)
    out_path = os.path.join(out_dir, module_name(data["gpu"]) + ".py")
    with open(out_path, "w") as f:
        f.write(src)
    print(f"\nwrote {os.path.relpath(out_path)}")
    result = dict(validation=stats, cross_validation=cv, depths=depths, held_out=rows)
    with open(os.path.splitext(path)[0] + ".validation.json", "w") as f:
        json.dump(result, f, indent=1)
    return result
