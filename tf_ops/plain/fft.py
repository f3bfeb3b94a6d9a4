"""`stablehlo.fft` as TF's FFT ops (`tf.signal.fft`/`fft2d`/`fft3d` and their inverse and
real variants).

StableHLO transforms the trailing `len(fft_length)` (1 to 3) dimensions; IFFT and IRFFT divide
by the transform's size, as TF's inverse kernels do. RFFT takes real input of exactly
`fft_length` trailing sizes and keeps `fft_length[-1] // 2 + 1` outputs; IRFFT reads that many
trailing inputs and writes `fft_length` real values; TF's real kernels take the same
`fft_length` argument. float32/complex64 and float64/complex128 both have TF kernels.
"""
from __future__ import annotations

import tensorflow as tf

from tf_ops.plain.program import Op

_OPS = {
    "FFT": (tf.signal.fft, tf.signal.fft2d, tf.signal.fft3d),
    "IFFT": (tf.signal.ifft, tf.signal.ifft2d, tf.signal.ifft3d),
    "RFFT": (tf.signal.rfft, tf.signal.rfft2d, tf.signal.rfft3d),
    "IRFFT": (tf.signal.irfft, tf.signal.irfft2d, tf.signal.irfft3d),
}


def fft(ctx, op: Op, x):
    kind = op.attr("fft_type")
    length = [int(n) for n in op.attr("fft_length")]
    transform = _OPS[kind][len(length) - 1]
    if kind in ("FFT", "IFFT"):
        return transform(x)
    return transform(x, fft_length=tf.constant(length, tf.int32))


def check_fft(op: Op):
    kind = op.attr("fft_type")
    length = op.attr("fft_length") or []
    if kind not in _OPS:
        return f"unknown fft_type {kind}"
    if not 1 <= len(length) <= 3:
        return f"a {len(length)}-dimensional transform (TF's FFT ops take 1 to 3 dimensions)"
    if any(int(n) == 0 for n in length):
        return "an empty transform (fft_length 0)"
    return None
