"""Scenes of 1-4 objects, their rendering (photo and painting styles), and captions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

COLOURS = {
    "red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220),
    "yellow": (235, 210, 40), "purple": (150, 60, 190), "orange": (245, 140, 30),
}
# painting style: the same colour names, shifted, desaturated palette
PAINT_COLOURS = {
    "red": (190, 80, 70), "green": (90, 150, 90), "blue": (80, 110, 180),
    "yellow": (215, 195, 100), "purple": (140, 100, 160), "orange": (215, 150, 90),
}
SHAPES = ("circle", "square", "triangle", "star")
SIZES = ("small", "large")
TASKS = ("colour", "shape", "counting", "spatial", "long_description")
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four"}


@dataclass(frozen=True)
class Obj:
    shape: str
    colour: str
    size: str
    x: float  # centre, in [0, 1]
    y: float


@dataclass(frozen=True)
class Scene:
    objects: tuple[Obj, ...]


def sample_scene(rng: np.random.Generator, n_objects: int | None = None) -> Scene:
    """1-4 objects on a 4x4 grid of cells (never overlapping)."""
    k = int(rng.integers(1, 5)) if n_objects is None else n_objects
    cells = rng.choice(16, size=k, replace=False)
    objs = []
    for c in cells:
        cx, cy = (c % 4 + 0.5) / 4, (c // 4 + 0.5) / 4
        objs.append(Obj(
            shape=str(rng.choice(SHAPES)), colour=str(rng.choice(list(COLOURS))),
            size=str(rng.choice(SIZES)),
            x=float(cx + rng.uniform(-0.04, 0.04)), y=float(cy + rng.uniform(-0.04, 0.04)),
        ))
    return Scene(tuple(objs))


def _polygon(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    if shape == "square":
        return [(cx - r, cy - r), (cx + r, cy - r), (cx + r, cy + r), (cx - r, cy + r)]
    if shape == "triangle":
        return [(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)]
    # five-pointed star
    pts = []
    for i in range(10):
        ang = -np.pi / 2 + i * np.pi / 5
        rr = r if i % 2 == 0 else r * 0.45
        pts.append((cx + rr * np.cos(ang), cy + rr * np.sin(ang)))
    return pts


def render(scene: Scene, size: int = 64, style: str = "photo",
           rng: np.random.Generator | None = None) -> np.ndarray:
    """Draw a scene with PIL; returns a (size, size, 3) uint8 array.

    ``style="painting"`` uses a shifted palette, a textured canvas, brush-stroke jitter and
    a slight blur: the out-of-domain style.
    """
    rng = rng or np.random.default_rng(0)
    painting = style == "painting"
    if style not in ("photo", "painting"):
        raise ValueError(f"style must be 'photo' or 'painting', got {style!r}")
    bg = (236, 228, 205) if painting else (245, 245, 245)
    img = Image.new("RGB", (size, size), bg)
    d = ImageDraw.Draw(img)
    if painting:  # canvas texture: random short strokes
        for _ in range(size * 2):
            x, y = rng.uniform(0, size, 2)
            c = tuple(int(v) for v in np.clip(np.array(bg) + rng.normal(0, 18, 3), 0, 255))
            d.line([(x, y), (x + rng.uniform(-4, 4), y + rng.uniform(-4, 4))], fill=c, width=1)
    palette = PAINT_COLOURS if painting else COLOURS
    for o in scene.objects:
        r = size * (0.10 if o.size == "small" else 0.155)
        cx, cy = o.x * size, o.y * size
        col = palette[o.colour]
        if painting:
            col = tuple(int(v) for v in np.clip(np.array(col) + rng.normal(0, 12, 3), 0, 255))
        if o.shape == "circle":
            d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=col)
        else:
            d.polygon(_polygon(o.shape, cx, cy, r), fill=col)
        if painting:  # brush strokes over the shape
            for _ in range(6):
                x, y = cx + rng.uniform(-r, r), cy + rng.uniform(-r, r)
                c2 = tuple(int(v) for v in np.clip(np.array(col) + rng.normal(0, 25, 3), 0, 255))
                d.line([(x, y), (x + rng.uniform(-3, 3), y + rng.uniform(-3, 3))], fill=c2,
                       width=2)
    if painting:
        img = img.filter(ImageFilter.GaussianBlur(0.6))
    return np.asarray(img, dtype=np.uint8)


# ----------------------------------------------------------------- captions
def _np(o: Obj, with_size: bool = False) -> str:
    size = f"{o.size} " if with_size else ""
    return f"a {size}{o.colour} {o.shape}"


def relation(a: Obj, b: Obj) -> str:
    dx, dy = b.x - a.x, b.y - a.y
    if abs(dx) >= abs(dy):
        return "left of" if dx > 0 else "right of"
    return "above" if dy > 0 else "below"


OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}


def describe(scene: Scene, task: str, rng: np.random.Generator) -> tuple[list[str], dict]:
    """A correct caption of the scene for a task, as tokens plus the facts it states."""
    objs = list(scene.objects)
    o = objs[int(rng.integers(len(objs)))]
    if task == "colour":
        return f"there is {_np(o)}".split(), {"obj": o}
    if task == "shape":
        return f"the picture shows {_np(o, True)}".split(), {"obj": o}
    if task == "counting":
        shape = o.shape
        k = sum(1 for p in objs if p.shape == shape)
        return f"the number of {shape}s is {NUMBERS[k]}".split(), {"shape": shape, "count": k}
    if task == "spatial":
        if len(objs) < 2:
            return f"{_np(o)} alone in the middle".split(), {"obj": o}
        i, j = rng.choice(len(objs), 2, replace=False)
        a, b = objs[i], objs[j]
        return f"{_np(a)} {relation(a, b)} {_np(b)}".split(), {"a": a, "b": b}
    if task == "long_description":
        parts = [_np(p, True) for p in objs]
        body = parts[0] if len(parts) == 1 else " , ".join(parts[:-1]) + " and " + parts[-1]
        return f"a simple picture with {body} on a plain background".split(), {"objs": objs}
    raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


#: corruption operators and how much each lowers the true alignment
CORRUPTIONS = {
    "wrong_colour": 0.45, "wrong_shape": 0.45, "wrong_count": 0.4, "wrong_relation": 0.5,
    "hallucinated_object": 0.3, "omission": 0.2,
}
_TASK_CORRUPTIONS = {
    "colour": ("wrong_colour", "wrong_shape"),
    "shape": ("wrong_shape", "wrong_colour"),
    "counting": ("wrong_count", "wrong_shape"),
    "spatial": ("wrong_relation", "wrong_colour", "wrong_shape"),
    "long_description": ("wrong_colour", "wrong_shape", "hallucinated_object", "omission"),
}


_SHAPE_FORMS = set(SHAPES) | {s + "s" for s in SHAPES}


def _swap(tokens: list[str], vocab, rng) -> bool:
    idx = [i for i, t in enumerate(tokens) if t in vocab]
    if not idx:
        return False
    i = int(rng.choice(idx))
    plural = tokens[i].endswith("s") and tokens[i][:-1] in SHAPES
    same_form = [v for v in vocab if v != tokens[i] and (v.endswith("s") == plural
                                                           or v not in _SHAPE_FORMS)]
    tokens[i] = str(rng.choice(same_form))
    return True


def corrupt(tokens: list[str], op: str, scene: Scene, rng: np.random.Generator) -> bool:
    """Apply one corruption in place; False when it does not apply to this caption."""
    if op == "wrong_colour":
        return _swap(tokens, list(COLOURS), rng)
    if op == "wrong_shape":
        return _swap(tokens, list(SHAPES) + [s + "s" for s in SHAPES], rng)
    if op == "wrong_count":
        return _swap(tokens, list(NUMBERS.values()), rng)
    if op == "wrong_relation":
        for i in range(len(tokens) - 1):
            two = f"{tokens[i]} {tokens[i + 1]}"
            if two in OPPOSITE:
                tokens[i:i + 2] = OPPOSITE[two].split()
                return True
            if tokens[i] in ("above", "below"):
                tokens[i] = OPPOSITE[tokens[i]]
                return True
        return False
    if op == "hallucinated_object":
        if "and" not in tokens:
            return False
        extra = Obj(str(rng.choice(SHAPES)), str(rng.choice(list(COLOURS))), "small", 0, 0)
        i = tokens.index("and")
        tokens[i:i] = [",", *_np(extra, True).split()]
        return True
    if op == "omission":
        if "and" not in tokens:
            return False
        i = tokens.index("and")
        del tokens[i:i + 5]  # "and a <size> <colour> <shape>"
        # the previous "," becomes the new "and"
        commas = [j for j, t in enumerate(tokens[:i]) if t == ","]
        if commas:
            tokens[commas[-1]] = "and"
        return True
    raise ValueError(f"unknown corruption {op!r}")


def caption_with_score(scene: Scene, task: str, rng: np.random.Generator,
                       p_corrupt: float = 0.6) -> tuple[str, float, list[str]]:
    """A caption for ``task`` and its true alignment in [0, 1].

    With probability ``p_corrupt`` one to three distinct corruptions are applied (each at
    most once, so none undoes another); the true score is the product of (1 - severity) over
    the corruptions that took effect. A swap can, rarely, land on a fact that another object
    makes true: that is label noise the annotators share, as in real benchmarks.
    """
    tokens, _ = describe(scene, task, rng)
    applied: list[str] = []
    if rng.uniform() < p_corrupt:
        ops = list(_TASK_CORRUPTIONS[task])
        k = int(rng.integers(1, min(3, len(ops)) + 1))
        for op in rng.choice(ops, size=k, replace=False):
            if corrupt(tokens, str(op), scene, rng):
                applied.append(str(op))
    score = float(np.prod([1 - CORRUPTIONS[o] for o in applied])) if applied else 1.0
    text = " ".join(tokens).replace(" ,", ",")
    return text, score, applied


