"""A CUDA producer in its own process for the GPU suites (CUDA IPC needs two processes):
    gpu_peer.py PATH FRAMES H W SLOTS publish|inplace [caps]
Frame `seq` holds gpu_pattern(seq), made on the GPU with torch: on device CUDAIPC_PEER_DEVICE
(default 0), where the slots live too (test_multi_gpu.py reads them on the other GPU)."""

from __future__ import annotations

import os
import sys

import torch

import cudaipc


def gpu_pattern(seq: int, shape, device="cuda") -> torch.Tensor:
    n = 1
    for d in shape:
        n *= d
    i = torch.arange(n, device=device, dtype=torch.int64)
    return ((i * 7 + seq * 13) % 251).to(torch.uint8).reshape(shape)


def main() -> None:
    path, frames, h, w, slots, how = sys.argv[1:7]
    caps = sys.argv[7] if len(sys.argv) > 7 else None
    shape = (int(h), int(w), 4)
    device = int(os.environ.get("CUDAIPC_PEER_DEVICE", "0"))
    torch.cuda.set_device(device)  # gpu_pattern's "cuda" is this device
    with cudaipc.Producer(path, memory="cuda", num_slots=int(slots), block_timeout=30,
                          caps=caps, device=device) as p:
        p.wait_for_consumers(timeout=60)
        print("ready", flush=True)
        for seq in range(1, int(frames) + 1):
            if how == "publish":
                # A fresh tensor each time, freed at once: the copy must finish before its memory
                # is reused.
                assert p.publish(gpu_pattern(seq, shape), pts=seq)
            else:
                with p.frame(shape, "uint8", pts=seq) as slot:
                    torch.from_dlpack(slot).copy_(gpu_pattern(seq, shape))
        print("done", flush=True)


if __name__ == "__main__":
    main()
