#!/usr/bin/env python3
"""Object detection between two pipelines: frames from a camera-style channel (cudaipcsink), the
objects found in each, and the frame published again with its detections on a second channel,
where `cudaipcsrc ! objectdetectionoverlay` draws them (GStreamer 1.24+).

  gst-launch-1.0 videotestsrc pattern=ball is-live=true \\
      ! video/x-raw,format=RGBA,width=640,height=480 \\
      ! cudaipcsink ipc-mode=host socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0
  python3 examples/python/detect.py $XDG_RUNTIME_DIR/cudaipc/cam0 $XDG_RUNTIME_DIR/cudaipc/det0
  gst-launch-1.0 cudaipcsrc socket-path=$XDG_RUNTIME_DIR/cudaipc/det0 ! videoconvert \\
      ! objectdetectionoverlay ! videoconvert ! autovideosink

(host memory: no GPU needed. For a GPU channel put `cudaupload !` before the sink and
`cudadownload !` after the source, and write them cudaipcringsink and cudaipcringsrc: the same
elements under names nvcodec, whose cudaupload and cudadownload those are, does not also have.)

Detectors:
- builtin (default): the bright pixels' bounding box, which finds the ball of `videotestsrc
  pattern=ball` (a white disc of radius 20 on black, its edge blended over 2 px; frame t's
  centre is x = 20 + (0.5 + 0.5 sin(2 pi t / 200)) (w - 40), y likewise with sqrt(2) t and h):
  pixels at least --threshold bright (128: the blend's midpoint, the disc of radius 19) give a
  box centred on the ball to the pixel. On the GPU with torch for CUDA channels (one copy of four
  numbers back per frame), NumPy for host channels.
- torchvision:NAME: any torchvision detection model (fasterrcnn_resnet50_fpn_v2, retinanet_...,
  ssdlite320_mobilenet_v3_large, ...) with its default weights, which torchvision downloads into
  torch's cache the first time (TORCH_HOME); boxes scoring at least --score are published with
  the weights' category names.

Each frame is published again with `publish(frame, detections=...)`: one copy from the input's
slot straight into the output's (on the GPU for CUDA channels), the detections into the slot's
meta area; the input frame's other metas (tensors, custom, timestamps) are forwarded with it.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import cudaipc

Detector = Callable[[cudaipc.Frame], Dict[str, Any]]
NO_DETECTIONS = {"boxes": np.zeros((0, 4), np.float32), "labels": ["ball"] * 0,
                 "scores": np.zeros(0, np.float32)}


def box_from_mask_numpy(mask: np.ndarray) -> Optional[np.ndarray]:
    """x1, y1, x2, y2 (exclusive) of the True pixels of an (H, W) mask, or None."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return np.array([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1], np.float32)


def builtin_detector(threshold: int) -> Detector:
    """The bright pixels' bounding box: one 'ball' per frame, when any pixel is bright."""
    torch: Any = None
    try:
        import torch
    except ImportError:
        pass

    def one(box: Optional[np.ndarray]) -> Dict[str, Any]:
        if box is None:
            return NO_DETECTIONS
        return {"boxes": box[None], "labels": ["ball"], "scores": np.ones(1, np.float32)}

    def detect(frame: cudaipc.Frame) -> Dict[str, Any]:
        if frame.device == "cpu" or torch is None:
            img = frame.numpy()  # a view of a host slot; a copy from a CUDA one without torch
            return one(box_from_mask_numpy(img[..., :3].max(axis=2) >= threshold))
        x = torch.from_dlpack(frame)  # zero-copy, ordered after the frame on torch's stream
        mask = x[..., :3].amax(dim=2) >= threshold
        rows, cols = mask.any(dim=1).int(), mask.any(dim=0).int()
        h, w = mask.shape
        # First and last bright row and column without a nonzero() (which waits for the GPU):
        # argmax finds the first 1, of the flipped vector the last.
        stats = torch.stack([cols.argmax(), rows.argmax(), w - cols.flip(0).argmax(),
                             h - rows.flip(0).argmax(), rows.max()]).cpu().numpy()
        return one(stats[:4].astype(np.float32) if stats[4] else None)

    return detect


def torchvision_detector(name: str, score: float, device: str) -> Detector:
    """A torchvision detection model with its default weights (downloaded once)."""
    import torch
    import torchvision

    weights = torchvision.models.get_model_weights(name).DEFAULT
    model = torchvision.models.get_model(name, weights=weights).eval().to(device)
    preprocess = weights.transforms()
    categories = list(weights.meta["categories"])

    def image(frame: cudaipc.Frame) -> Any:
        x = torch.from_dlpack(frame) if frame.device != "cpu" else \
            torch.from_numpy(frame.numpy().copy())
        chw = x[..., :3].permute(2, 0, 1).to(device)  # RGB(A) (H, W, C) -> (3, H, W)
        return preprocess(chw)

    def found(out: Dict[str, Any]) -> Dict[str, Any]:
        keep = out["scores"] >= score
        # CUDA tensors: publish copies them to the host once, side by side.
        return {"boxes": out["boxes"][keep], "labels": out["labels"][keep],
                "scores": out["scores"][keep], "label_names": categories}

    @torch.inference_mode()
    def detect(frame: cudaipc.Frame) -> Dict[str, Any]:
        return found(model([image(frame)])[0])

    @torch.inference_mode()
    def detect_batch(frames: List[cudaipc.Frame]) -> List[Dict[str, Any]]:
        # torchvision's detectors take a list of images: one call for the whole batch.
        return [found(o) for o in model([image(f) for f in frames])]

    detect.batch = detect_batch  # type: ignore[attr-defined]
    return detect


def output_caps(frame: cudaipc.Frame) -> Optional[str]:
    """Raw-video caps for the output, from the input's (format and framerate kept)."""
    caps = frame.caps
    if not caps.startswith("video/x-raw") or len(frame.shape) != 3:
        return None  # other/tensors: the producer derives them
    fmt = re.search(r"format=(?:\(string\))?(\w+)", caps)
    rate = re.search(r"framerate=(?:\(fraction\))?(\d+/\d+)", caps)
    h, w = frame.shape[:2]
    return (f"video/x-raw,format={fmt.group(1) if fmt else 'RGBA'},width={w},height={h},"
            f"framerate={rate.group(1) if rate else '0/1'}")


def check_model(ap: argparse.ArgumentParser, model: str) -> None:
    """Refuses a --model that cannot work before any frame is read (exits with a usage line)."""
    if model == "builtin":
        return
    if not model.startswith("torchvision:"):
        ap.error(f"--model {model!r}: builtin or torchvision:NAME")
    try:
        import torchvision
    except ImportError as e:
        ap.error(f"--model {model}: torchvision cannot be imported ({e})")
    name = model.split(":", 1)[1]
    try:
        known = torchvision.models.list_models(module=torchvision.models.detection)
    except (AttributeError, TypeError):  # torchvision before 0.14: no registry to ask
        return
    if name not in known:
        ap.error(f"--model {model}: no such torchvision detection model (one of: "
                 f"{', '.join(sorted(known))})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="socket path of the camera channel (a cudaipcsink)")
    ap.add_argument("output", help="socket path to publish frames and detections on")
    ap.add_argument("--model", default="builtin", help="builtin, or torchvision:NAME")
    ap.add_argument("--threshold", type=int, default=128,
                    help="builtin: the brightness (max of R, G, B) a ball pixel has at least")
    ap.add_argument("--score", type=float, default=0.5,
                    help="torchvision: the lowest score published")
    ap.add_argument("--mode", default="every-frame", choices=["every-frame", "latest"])
    ap.add_argument("--frames", type=int, default=0, help="stop after N frames (0: at EOS)")
    ap.add_argument("--wait-for-consumer", type=float, default=0.0, metavar="SECONDS",
                    help="before the first output frame, wait this long for a reader")
    ap.add_argument("--num-slots", type=int, default=4)
    args = ap.parse_args()
    check_model(ap, args.model)

    n, detect, out = 0, None, None
    start = time.monotonic()
    with cudaipc.Consumer(args.input, mode=args.mode, timeout=30) as src:
        for frame in src:
            with frame:
                if detect is None:
                    if args.model == "builtin":
                        detect = builtin_detector(args.threshold)
                    else:  # torchvision:NAME (check_model)
                        device = frame.device if frame.device != "cpu" else "cpu"
                        detect = torchvision_detector(args.model.split(":", 1)[1], args.score,
                                                      device)
                if out is None:
                    out = cudaipc.Producer(args.output, memory=src.memory or "host",
                                           num_slots=args.num_slots, caps=output_caps(frame),
                                           block_timeout=30)
                    if args.wait_for_consumer > 0:
                        out.wait_for_consumers(timeout=args.wait_for_consumer)
                dets = dict(detect(frame))
                names = dets.pop("label_names", None)
                # Everything the frame carried, except analytics this detector replaces.
                keep = [r for r in frame.metas if not isinstance(r, cudaipc.metas.AnalyticsRecord)]
                out.publish(frame, pts=frame.pts, duration=frame.duration, detections=dets,
                            label_names=names, metas=keep or None)
            n += 1
            if args.frames and n >= args.frames:
                break
    if out is not None:
        out.close()
    elapsed = time.monotonic() - start
    print(f"done frames={n} fps={n / elapsed if elapsed else 0:.1f}", flush=True)


if __name__ == "__main__":
    # A failure is one line (what failed, and why), not a traceback.
    try:
        main()
    except cudaipc.Error as e:
        sys.exit(f"detect.py: {e}")
    except KeyboardInterrupt:
        sys.exit(130)
