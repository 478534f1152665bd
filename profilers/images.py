"""Real images for calibration and quality: a user folder, or the photographs scikit-image ships."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sessions.errors import InputError

SKIMAGE_PHOTOS = (
    "astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "retina",
    "camera", "coins", "moon", "clock", "brick", "grass", "gravel", "cell", "colorwheel", "page", "text",
)
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".ppm"}


@dataclass
class ImageSet:
    source: str  # "scikit-image sample photographs" or the folder
    images: list  # PIL images, RGB
    labels: list[str]  # file or photo names (class folder/file for ImageNet-style folders)


def load_images(folder: Path | None, limit: int | None = None) -> ImageSet:
    from PIL import Image

    if folder is None:
        import numpy as np
        import skimage.data

        images, labels = [], []
        for name in SKIMAGE_PHOTOS:
            try:
                array = getattr(skimage.data, name)()
            except Exception:  # a sample that needs a download is skipped: there is no network
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

    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"--images {folder}: no such folder")
    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if limit:
        paths = paths[:limit]
    if not paths:
        raise InputError(f"--images {folder}: no image files (jpg, png, ...) in it or its class folders")
    images, labels = [], []
    for path in paths:
        try:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        except OSError as exc:
            raise InputError(f"cannot read image {path}: {exc}") from None
        labels.append(str(path.relative_to(folder)))
    return ImageSet(str(folder), images, labels)
