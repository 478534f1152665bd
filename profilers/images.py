"""Real images for calibration and quality: a user folder, or the photographs scikit-image ships.

With `--eval-count`, calibration and quality images are disjoint: both are taken at a fixed stride
through the sorted folder (the seeds' method: 2,000 images at a stride of 25, 500 for calibration and
1,500 held out). A folder with `images/` and `annotations/` (the ADE20K layout) also gives label maps
for mIoU. Stress inputs (zeros, constants, saturated, extreme-range, noise) check every variant for NaN/Inf.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessions.documents.errors import InputError

SKIMAGE_PHOTOS = (
    "astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "retina",
    "camera", "coins", "moon", "clock", "brick", "grass", "gravel", "cell", "colorwheel", "page", "text",
)
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".ppm"}
ADE_IGNORE = 255  # ADE20K label 0 ("other") is ignored; 1..150 become classes 0..149


@dataclass
class ImageSet:
    source: str  # "scikit-image sample photographs" or the folder
    images: list  # PIL images, RGB
    labels: list[str]  # file or photo names (class folder/file for ImageNet-style folders)
    masks: list[Any] = field(default_factory=list)  # label maps (numpy, H x W) where the folder has annotations


@dataclass(frozen=True)
class Split:
    calibration: list[int]  # indices into the sorted image list
    evaluation: list[int]
    stride: int
    available: int

    def describe(self) -> str:
        return (f"{len(self.calibration)} for calibration and {len(self.evaluation)} held out (disjoint), at a "
                f"fixed stride of {self.stride} through {self.available} images")


def split(available: int, calib: int, evaluate: int) -> Split:
    """`calib + evaluate` images at a fixed stride; calibration interleaved evenly among them."""
    wanted = calib + evaluate
    if wanted > available:
        raise InputError(f"--calib-count {calib} + --eval-count {evaluate} = {wanted} images, but only {available} "
                         "are available: lower the counts or pass a larger --images folder")
    stride = available // wanted
    chosen = [i * stride for i in range(wanted)]
    to_calib = [(j + 1) * calib // wanted > j * calib // wanted for j in range(wanted)]
    return Split([c for c, flag in zip(chosen, to_calib, strict=False) if flag],
                 [c for c, flag in zip(chosen, to_calib, strict=False) if not flag],
                 stride, available)


def image_paths(folder: Path) -> tuple[list[Path], Path]:
    """Sorted image files of `folder` (or of its `images/` where it has `annotations/`), and their root."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"--images {folder}: no such folder")
    root = folder / "images" if (folder / "annotations").is_dir() and (folder / "images").is_dir() else folder
    paths = sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not paths:
        raise InputError(f"--images {folder}: no image files (jpg, png, ...) in it or its class folders")
    return paths, root


def load_images(folder: Path | None, limit: int | None = None, indices: list[int] | None = None) -> ImageSet:
    if folder is None:
        return _skimage_photos(limit)
    paths, root = image_paths(folder)
    if indices is not None:
        paths = [paths[i] for i in indices]
    elif limit:
        paths = paths[:limit]
    annotations = Path(folder) / "annotations" if root != Path(folder) else None
    images, labels, masks = [], [], []
    for path in paths:
        images.append(_read(path, "RGB"))
        labels.append(str(path.relative_to(root)))
        if annotations is not None:
            masks.append(_mask(annotations / path.relative_to(root).with_suffix(".png")))
    return ImageSet(str(folder), images, labels, masks)


def _read(path: Path, mode: str):
    import warnings

    from PIL import Image

    try:
        # past PIL's pixel limit (89 million pixels) it warns, past twice that it raises
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                return image.convert(mode)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise InputError(f"cannot read image {path}: larger than {Image.MAX_IMAGE_PIXELS} pixels, refused as a "
                         "possible decompression bomb") from None
    except (OSError, ValueError) as exc:  # unreadable, truncated, or a mode PIL cannot convert
        raise InputError(f"cannot read image {path}: {exc}") from None


def _mask(path: Path):
    import numpy as np

    if not path.is_file():
        raise InputError(f"no annotation {path} for its image")
    labels = np.asarray(_read(path, "L"), dtype=np.int64)
    return np.where(labels == 0, ADE_IGNORE, labels - 1)


def _skimage_photos(limit: int | None) -> ImageSet:
    import numpy as np
    import skimage.data
    from PIL import Image

    images, labels = [], []
    for name in SKIMAGE_PHOTOS:
        try:
            array = getattr(skimage.data, name)()
        except Exception:  # noqa: BLE001, S112  (a sample that needs a download is skipped: there is no network)
            continue
        if array.dtype != np.uint8:
            array = (array > 0).astype(np.uint8) * 255 if array.dtype == bool else array.astype(np.uint8)
        images.append(Image.fromarray(array).convert("RGB"))
        labels.append(name)
        if limit and len(images) >= limit:
            break
    if not images:
        raise InputError("scikit-image ships no readable sample photographs here; pass --images DIR")
    return ImageSet("scikit-image sample photographs", images, labels)


STRESS_CASES = 15  # what stress_inputs makes


def stress_inputs(shape: tuple[int, ...], count: int | None = None) -> list[tuple[str, Any]]:
    """Named input tensors (numpy float32, one sample of `shape`) that push a network's numerics.

    Zeros and constants, inputs saturated at the normalized range's ends, extreme ranges up to fp16's
    largest value, and Gaussian noise at several scales (seeded). `count` of them, evenly spaced
    through that list (5: zeros, constant 255, checkerboard saturated, extreme +-65504, noise sigma 1);
    None: all `STRESS_CASES`.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    low, high = (0 - 0.485) / 0.229, (1 - 0.406) / 0.225  # the ImageNet-normalized ends of [0, 1]
    cases: list[tuple[str, Any]] = [("zeros", np.zeros(shape))]
    cases += [(f"constant {value:g}", np.full(shape, value)) for value in (1.0, -1.0, 255.0)]
    cases += [("saturated low", np.full(shape, low)), ("saturated high", np.full(shape, high)),
              ("checkerboard saturated", np.where(np.indices(shape).sum(axis=0) % 2 == 0, low, high))]
    cases += [(f"extreme +-{value:g}", rng.choice([-value, value], size=shape)) for value in (1e3, 1e4, 65504.0)]
    cases += [(f"noise sigma {sigma:g}", rng.normal(0, sigma, size=shape)) for sigma in (0.01, 0.1, 1, 10, 100)]
    if count is not None and count < len(cases):
        cases = [cases[i * len(cases) // count] for i in range(count)]
    return [(name, array.astype(np.float32)) for name, array in cases]
