"""LAPACK's elementary reflector (?larfg), on a masked full-length vector.

The portable algorithms that must give LAPACK's results element for element (tridiagonal
reduction, column-pivoted QR) build their reflectors with this, so the reflector vectors,
taus and the new diagonal entry (beta) follow LAPACK's conventions: beta = -sign(Re alpha) *
||(alpha, x)||, tau = (beta - alpha) / beta, v = (1, x / (alpha - beta)).
"""

from __future__ import annotations

import jax.numpy as jnp


def larfg(alpha, x):
    """The reflector of (alpha, x): returns (beta, tau, x / (alpha - beta)).

    Args:
        alpha: the scalar that the reflector maps to beta (real or complex).
        x: the rest of the vector, with zeros wherever it is not part of it.

    When x is zero and alpha is real, H = I: tau = 0, beta = alpha, x unchanged (LAPACK).
    """
    real_dtype = jnp.finfo(x.dtype).dtype
    xnorm = jnp.sqrt(jnp.sum(jnp.abs(x) ** 2)).astype(real_dtype)
    alphr = jnp.real(alpha)
    alphi = jnp.imag(alpha) if jnp.iscomplexobj(alpha) else jnp.zeros_like(alphr)
    identity = (xnorm == 0) & (alphi == 0)
    norm = jnp.sqrt(alphr * alphr + alphi * alphi + xnorm * xnorm)
    # Fortran SIGN(norm, alphr): +norm for alphr >= 0 (also -0.0).
    beta = jnp.where(alphr >= 0, -norm, norm)
    safe_beta = jnp.where(identity, 1, beta)
    if jnp.iscomplexobj(alpha):
        tau = jnp.where(identity, 0, ((beta - alphr) / safe_beta)
                        - 1j * (alphi / safe_beta)).astype(x.dtype)
    else:
        tau = jnp.where(identity, 0, (beta - alphr) / safe_beta).astype(x.dtype)
    denom = jnp.where(identity, 1, alpha - beta.astype(x.dtype))
    scaled = jnp.where(identity, x, x / denom)
    beta = jnp.where(identity, alphr, beta)
    return beta, tau, scaled
