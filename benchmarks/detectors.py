"""Real detectors that ship inside packages, as a user would call them on a batch of frames.

Each detector is a class: made once per worker (loading its model), called with a batch of
RGB frames ``(n, H, W, 3)`` and returning one ``(k, 4)`` float array of boxes
``(x0, y0, x1, y1)`` per frame. None is a dependency of hyperframes; the reuse benchmark
installs them:

    pip install 'opencv-python-headless<5'     # Haar cascades and HOG (OpenCV 5 dropped them)
    pip install torch==2.13.0 tqdm             # the CPU build on this machine's disk
    pip install --no-deps facenet-pytorch      # MTCNN with its bundled weights

facenet-pytorch imports torchvision only for ``ops.batched_nms``; :func:`_torchvision_stand_in`
provides that one function when torchvision is absent (PyPI's torchvision does not import
beside the CPU torch file here).
"""

from __future__ import annotations

import sys
import types

import cv2
import numpy as np

BOXES = np.zeros((0, 4), np.float32)


def _as_boxes(rects: object) -> np.ndarray:
    """OpenCV's (x, y, w, h) rectangles as (x0, y0, x1, y1) float boxes."""
    arr = np.asarray(rects, np.float32).reshape(-1, 4)
    if not len(arr):
        return BOXES
    out = arr.copy()
    out[:, 2:] += out[:, :2]
    return out


class HaarFaces:
    """An OpenCV Haar cascade on the grey frame (OpenCV 4.x): frontal faces by default."""

    name = "haar-face"
    cascade_file = "haarcascade_frontalface_default.xml"

    def __init__(self) -> None:
        if not hasattr(cv2, "CascadeClassifier"):
            raise RuntimeError(
                "this OpenCV has no CascadeClassifier; pip install 'opencv-python-headless<5'"
            )
        self.cascade = cv2.CascadeClassifier(cv2.data.haarcascades + self.cascade_file)

    def __call__(self, frames: np.ndarray) -> list[np.ndarray]:
        out = []
        for frame in frames:
            grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
            found = self.cascade.detectMultiScale(grey, 1.1, 5, minSize=(24, 24))
            out.append(_as_boxes(found))
        return out


class HaarProfiles(HaarFaces):
    name = "haar-profile"
    cascade_file = "haarcascade_profileface.xml"


class HaarEyes(HaarFaces):
    name = "haar-eyes"
    cascade_file = "haarcascade_eye.xml"


class HogPeople:
    """OpenCV's HOG + linear SVM people detector, on the frame at most 640 pixels wide."""

    name = "hog-people"

    def __init__(self) -> None:
        if not hasattr(cv2, "HOGDescriptor"):
            raise RuntimeError(
                "this OpenCV has no HOGDescriptor; pip install 'opencv-python-headless<5'"
            )
        self.hog = cv2.HOGDescriptor()
        self.hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())

    def __call__(self, frames: np.ndarray) -> list[np.ndarray]:
        out = []
        for frame in frames:
            scale = min(1.0, 640 / frame.shape[1])
            img = frame if scale == 1.0 else cv2.resize(frame, None, fx=scale, fy=scale)
            found, weights = self.hog.detectMultiScale(
                img, winStride=(8, 8), padding=(8, 8), scale=1.05
            )
            keep = np.asarray(weights).reshape(-1) > 0.5
            out.append(_as_boxes(np.asarray(found).reshape(-1, 4)[keep]) / scale)
        return out


def _torchvision_stand_in() -> None:
    """Provide ``torchvision.ops.batched_nms`` (all facenet-pytorch needs) if absent."""
    try:
        import torchvision  # noqa: F401

        return
    except Exception:
        pass
    import torch

    def nms(boxes: torch.Tensor, scores: torch.Tensor, iou: float) -> torch.Tensor:
        order = scores.argsort(descending=True)
        keep: list[int] = []
        x0, y0, x1, y1 = boxes.unbind(1)
        area = (x1 - x0).clamp(min=0) * (y1 - y0).clamp(min=0)
        while order.numel():
            i = int(order[0])
            keep.append(i)
            rest = order[1:]
            w = (torch.minimum(x1[i], x1[rest]) - torch.maximum(x0[i], x0[rest])).clamp(min=0)
            h = (torch.minimum(y1[i], y1[rest]) - torch.maximum(y0[i], y0[rest])).clamp(min=0)
            inter = w * h
            order = rest[inter / (area[i] + area[rest] - inter) <= iou]
        return torch.as_tensor(keep, dtype=torch.long)

    def batched_nms(
        boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou: float
    ) -> torch.Tensor:
        if boxes.numel() == 0:
            return torch.empty((0,), dtype=torch.long)
        offsets = idxs.to(boxes) * (boxes.max() + 1)
        return nms(boxes + offsets[:, None], scores, iou)

    module = types.ModuleType("torchvision")
    module.__path__ = []  # a package, so that its submodules import
    ops = types.ModuleType("torchvision.ops")
    ops.__path__ = []
    boxes = types.ModuleType("torchvision.ops.boxes")
    ops.batched_nms = boxes.batched_nms = batched_nms  # type: ignore[attr-defined]
    ops.boxes = boxes  # type: ignore[attr-defined]
    # imported by facenet-pytorch's face cropping, which detection does not use
    transforms = types.ModuleType("torchvision.transforms")
    transforms.functional = types.ModuleType("torchvision.transforms.functional")  # type: ignore[attr-defined]
    module.ops, module.transforms = ops, transforms  # type: ignore[attr-defined]
    sys.modules.update(
        {
            "torchvision": module,
            "torchvision.ops": ops,
            "torchvision.ops.boxes": boxes,
            "torchvision.transforms": transforms,
            "torchvision.transforms.functional": transforms.functional,  # type: ignore[attr-defined]
        }
    )


class MtcnnFaces:
    """facenet-pytorch's MTCNN (bundled weights) on the CPU; faces with probability >= 0.9."""

    name = "mtcnn-face"

    def __init__(self) -> None:
        _torchvision_stand_in()
        import torch
        from facenet_pytorch.models.mtcnn import MTCNN

        torch.set_num_threads(1)  # one core per worker, as the other detectors
        self.mtcnn = MTCNN(keep_all=True, device="cpu")

    def __call__(self, frames: np.ndarray) -> list[np.ndarray]:
        out = []
        for frame in frames:
            boxes, probs = self.mtcnn.detect(frame)
            if boxes is None:
                out.append(BOXES)
                continue
            keep = np.asarray(probs) >= 0.9
            out.append(np.asarray(boxes, np.float32)[keep].reshape(-1, 4))
        return out


DETECTORS = {d.name: d for d in (HaarFaces, HaarProfiles, HaarEyes, HogPeople, MtcnnFaces)}


def brightness(frames: np.ndarray) -> np.ndarray:
    """A cheap function: each frame's mean level (the map benchmark's memory check)."""
    return frames.mean(axis=(1, 2, 3))
